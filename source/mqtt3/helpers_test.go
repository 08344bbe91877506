package mqtt3

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testFilter = "replayguard/test/#"

// testConfig is a consumer of brokers with a fresh client id and fast
// retries, logging to t.
func testConfig(t testing.TB, brokers ...string) Config {
	return Config{
		Brokers:         brokers,
		ClientID:        testbroker.UniqueClientID("rg-consumer"),
		Filters:         []Filter{{Topic: testFilter, QoS: 1}},
		BatchSize:       16,
		BatchLinger:     5 * time.Millisecond,
		ConnectRetryMin: 20 * time.Millisecond,
		ConnectRetryMax: 200 * time.Millisecond,
		ConnectTimeout:  2 * time.Second,
		CommitRetryMin:  10 * time.Millisecond,
		CommitRetryMax:  50 * time.Millisecond,
		ShutdownTimeout: 2 * time.Second,
		Logger:          testLogger(t),
	}
}

// testLogger logs to t until the test ends; paho may report a connection
// error from its own goroutine a moment later.
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(string(p[:len(p)-1]))
	}
	return len(p), nil
}

// running is a consumer whose Run goes on in the background.
type running struct {
	*Consumer
	cancel context.CancelFunc
	done   chan error
}

// start runs a consumer of cfg until stop or the end of the test.
func start(t testing.TB, cfg Config, p Processor) *running {
	t.Helper()
	c, err := New(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	return startConsumer(t, c)
}

// startConsumer runs c until stop or the end of the test.
func startConsumer(t testing.TB, c *Consumer) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Consumer: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// stop cancels Run and returns what it returned.
func (r *running) stop() error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(30 * time.Second):
		return errors.New("Run did not return within 30s")
	}
}

// waitReady waits until the consumer is connected and subscribed.
func (r *running) waitReady(t testing.TB) {
	t.Helper()
	waitFor(t, "consumer ready", 10*time.Second, r.Ready)
}

func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// key identifies a test message: source and sequence.
type key struct {
	Source string
	Seq    int64
}

func keyOf(t testing.TB, m engine.Message) key {
	var p struct {
		Source string `json:"source_id"`
		Seq    int64  `json:"sequence"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		t.Errorf("payload %q: %v", m.Payload, err)
	}
	return key{p.Source, p.Seq}
}

// recorder is a Processor that commits by recording: every call, and how
// often each key was committed. Hook, when set, runs first; an error from
// it fails the call with nothing recorded.
type recorder struct {
	t    testing.TB
	Hook func(ctx context.Context, call int, msgs []engine.Message) error

	mu        sync.Mutex
	calls     [][]engine.Message // every call, failed ones included
	committed []engine.Message
	count     map[key]int
}

func newRecorder(t testing.TB) *recorder { return &recorder{t: t, count: map[key]int{}} }

func (r *recorder) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	r.mu.Lock()
	call := len(r.calls)
	r.calls = append(r.calls, append([]engine.Message(nil), msgs...))
	r.mu.Unlock()
	if r.Hook != nil {
		if err := r.Hook(ctx, call, msgs); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.committed = append(r.committed, m)
		r.count[keyOf(r.t, m)]++
	}
	return make([]engine.Decision, len(msgs)), nil
}

func (r *recorder) Committed() []engine.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]engine.Message(nil), r.committed...)
}

func (r *recorder) Calls() [][]engine.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]engine.Message(nil), r.calls...)
}

func (r *recorder) Count(k key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[k]
}

func (r *recorder) Len() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.committed))
}

// events records Observer events.
type events struct {
	mu  sync.Mutex
	all []Event
}

func (e *events) Observe(ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// Sum adds N over the events of kind k.
func (e *events) Sum(k EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Kind == k {
			n += max(ev.N, 1)
		}
	}
	return n
}

// Last returns the last event of kind k.
func (e *events) Last(k EventKind) (Event, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.all) - 1; i >= 0; i-- {
		if e.all[i].Kind == k {
			return e.all[i], true
		}
	}
	return Event{}, false
}

// publish sends n messages of source through pub and fails unless all were
// acknowledged.
func publish(t testing.TB, pub *testbroker.Publisher, source string, n int) {
	t.Helper()
	if got := pub.Publish(context.Background(), source, n); got != n {
		t.Fatalf("broker acknowledged %d of %d publishes", got, n)
	}
}

// drainSession connects a fresh consumer under clientID and returns what it
// receives within quiet of silence: what the broker still held unacked.
func drainSession(t testing.TB, url, clientID string, quiet time.Duration) []engine.Message {
	t.Helper()
	cfg := testConfig(t, url)
	cfg.ClientID = clientID
	rec := newRecorder(t)
	r := start(t, cfg, rec)
	r.waitReady(t)
	last, lastChange := int64(-1), time.Now()
	for time.Since(lastChange) < quiet {
		if n := rec.Len(); n != last {
			last, lastChange = n, time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	return rec.Committed()
}

func keys(t testing.TB, msgs []engine.Message) []key {
	out := make([]key, len(msgs))
	for i, m := range msgs {
		out[i] = keyOf(t, m)
	}
	return out
}

func seqs(source string, from, to int64) []key {
	var out []key
	for s := from; s <= to; s++ {
		out = append(out, key{source, s})
	}
	return out
}

func fmtKeys(ks []key) string {
	if len(ks) > 12 {
		return fmt.Sprintf("%v … (%d)", ks[:12], len(ks))
	}
	return fmt.Sprint(ks)
}
