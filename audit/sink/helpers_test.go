package sink_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

var meters = []engine.Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}}

// rig is a memory store, a sink set on it and an engine that wakes the set.
type rig struct {
	st     *memory.Store
	set    *sink.Set
	e      *engine.Engine
	next   int
	cancel context.CancelFunc
	done   chan struct{}
	logs   *tWriter
}

func newRig(t *testing.T, name string, exp sink.Exporter) *rig {
	t.Helper()
	r := &rig{st: memory.New(), logs: &tWriter{t: t}}
	var err error
	r.set, err = sink.New(r.st, sink.Options{Sinks: []sink.Sink{{Name: name, Exporter: exp}},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Batch: 40,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if r.e, err = engine.New(t.Context(), r.st, engine.Options{Routes: meters, Observer: r.set}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() { defer close(r.done); r.set.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *rig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.cancel = nil
	r.e.Close()
	r.set.Close(context.Background())
}

// decide commits n fresh decisions in batches of 10.
func (r *rig) decide(t *testing.T, n int) {
	t.Helper()
	for n > 0 {
		msgs := make([]engine.Message, min(n, 10))
		for i := range msgs {
			msgs[i] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d","kwh":0.25}`, r.next)}
			r.next++
		}
		if _, err := r.e.Process(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
		n -= len(msgs)
	}
}

// waitCursor waits until the sink's cursor reaches pos.
func (r *rig) waitCursor(t *testing.T, name string, pos uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := r.st.Cursor(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if c == pos {
			return
		}
		if c > pos || time.Now().After(deadline) {
			t.Fatalf("cursor of %s is %d, want %d", name, c, pos)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkReceived asserts the received positions are 1..head, each at least
// once, and strictly increasing once repeats of a resent batch are folded.
func checkReceived(t *testing.T, got []uint64, head uint64) {
	t.Helper()
	seen := map[uint64]bool{}
	var high uint64
	for i, p := range got {
		if p > high+1 {
			t.Fatalf("received position %d (index %d) after %d: a record was skipped", p, i, high)
		}
		if p <= high && !seen[p] {
			t.Fatalf("position %d arrived after %d without having arrived before", p, high)
		}
		seen[p] = true
		high = max(high, p)
	}
	for p := uint64(1); p <= head; p++ {
		if !seen[p] {
			t.Fatalf("position %d never arrived (head %d, %d received)", p, head, len(got))
		}
	}
	if high != head {
		t.Fatalf("highest received %d, head %d", high, head)
	}
}

// tWriter logs to the test and keeps what it logged.
type tWriter struct {
	t   *testing.T
	mu  sync.Mutex
	all []byte
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	w.mu.Lock()
	w.all = append(w.all, p...)
	w.mu.Unlock()
	return len(p), nil
}

func (w *tWriter) String() string { w.mu.Lock(); defer w.mu.Unlock(); return string(w.all) }

// recorder keeps positions under a lock.
type recorder struct {
	mu  sync.Mutex
	pos []uint64
}

func (r *recorder) add(p uint64) { r.mu.Lock(); r.pos = append(r.pos, p); r.mu.Unlock() }
func (r *recorder) get() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.pos...)
}
