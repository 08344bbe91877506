package sink_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// hashExporter keeps every record it is given, in order.
type hashExporter struct {
	mu  sync.Mutex
	got []engine.AuditRecord
}

func (x *hashExporter) Export(_ context.Context, recs []engine.AuditRecord) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.got = append(x.got, recs...)
	return nil
}

func (x *hashExporter) Close(context.Context) error { return nil }

func (x *hashExporter) records() []engine.AuditRecord {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]engine.AuditRecord(nil), x.got...)
}

// TestASinkDeliversTheRecordsAMemberRecoveredAtPositionsItHadDelivered: a
// member's sink has delivered its chain up to position 30; the store fails
// over to a replica that holds it up to 15, and the member decides 16..30
// again from its journal: other records, at positions the sink had
// delivered. The sink must deliver them (and go on after them), so that
// the record it last delivered at every position is the chain's.
func TestASinkDeliversTheRecordsAMemberRecoveredAtPositionsItHadDelivered(t *testing.T) {
	ctx := t.Context()
	m := newJournaledSink(t, func(h *memory.Member) sink.ChainStore { return h })
	g, e, x := m.g, m.e, m.x
	decide := func(n int) { t.Helper(); m.decide(t, n) }
	waitDelivered := func(pos uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			recs := x.records()
			if len(recs) > 0 && recs[len(recs)-1].Position >= pos {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the sink did not deliver up to position %d: %d records delivered", pos, len(recs))
			}
			time.Sleep(time.Millisecond)
		}
	}
	decide(15)
	waitDelivered(15)
	replica := g.Checkpoint()
	decide(15)
	waitDelivered(30)
	g.FailOver(replica)
	if err := e.CheckStore(ctx); err != nil {
		t.Fatalf("the member did not recover what the store lost from its journal: %v", err)
	}
	decide(5)
	head := e.Stats().Position
	waitDelivered(head)

	m.checkDelivered(t, head, "")
}

// heldCursors is a member's handle whose cursor writes past a position
// wait, once armed, until released: a batch read from a store before it
// failed over whose cursor reaches the promoted standby after it.
type heldCursors struct {
	*memory.Member
	above   atomic.Uint64 // a write past it waits; 0: none does
	entered chan uint64   // the position of the write that waits
	release chan struct{}
}

func (h *heldCursors) hold(pos uint64) {
	if h.above.Load() == 0 || pos <= h.above.Load() {
		return
	}
	h.above.Store(0)
	h.entered <- pos
	<-h.release
}

func (h *heldCursors) SetChainCursor(ctx context.Context, member, sink string, pos uint64) error {
	h.hold(pos)
	return h.Member.SetChainCursor(ctx, member, sink, pos)
}

func (h *heldCursors) SetChainCursorAt(ctx context.Context, member, sink string, at engine.AuditHead) error {
	h.hold(at.Position)
	return h.Member.SetChainCursorAt(ctx, member, sink, at)
}

// TestASinkBatchReadBeforeAFailoverDoesNotSaveACursorPastTheRecordsDecidedAgain:
// a sink reads positions 16..19 of a member's chain and exports them; the
// store then fails over to a standby that holds the chain up to 15, the
// member decides 16..30 again from its journal, and only then does the
// batch's cursor reach the promoted store. The store must refuse it (the
// chain holds other records there now), so that the sink, and a process
// restarted from the cursor in the store, delivers the records standing at
// 16..19 too.
func TestASinkBatchReadBeforeAFailoverDoesNotSaveACursorPastTheRecordsDecidedAgain(t *testing.T) {
	ctx := t.Context()
	var held *heldCursors
	m := newJournaledSink(t, func(h *memory.Member) sink.ChainStore {
		held = &heldCursors{Member: h, entered: make(chan uint64, 1), release: make(chan struct{})}
		return held
	})
	g, h, e := m.g, m.h, m.e
	decide := func(n int) { t.Helper(); m.decide(t, n) }
	waitCursor := func(pos uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := h.ChainCursor(ctx, "m1", "file")
			if err != nil {
				t.Fatal(err)
			}
			if c >= pos {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the sink's cursor in the store is %d, not %d", c, pos)
			}
			time.Sleep(time.Millisecond)
		}
	}
	decide(15)
	waitCursor(15)
	replica := g.Checkpoint()
	held.above.Store(15)
	decide(15)
	stale := <-held.entered // a batch of the old primary's records, exported, its cursor not yet saved
	g.FailOver(replica)
	if err := e.CheckStore(ctx); err != nil {
		t.Fatalf("the member did not recover what the store lost from its journal: %v", err)
	}
	close(held.release)
	decide(5)
	head := e.Stats().Position
	waitCursor(head)

	m.checkDelivered(t, head, fmt.Sprintf(" (the stale batch's cursor was %d)", stale))
}

// journaledSink is member m1 of a memory group, with a journal, deciding
// meter readings, whose chain a sink named file streams to x (batches of
// 4) through the store its test gives (the member's handle, or one
// wrapping it).
type journaledSink struct {
	g    *memory.Group
	h    *memory.Member
	x    *hashExporter
	e    *engine.Engine
	next int
}

func newJournaledSink(t *testing.T, store func(*memory.Member) sink.ChainStore) *journaledSink {
	t.Helper()
	m := &journaledSink{g: memory.NewGroup(0, 0), x: &hashExporter{}}
	var err error
	if m.h, err = m.g.Open("m1"); err != nil {
		t.Fatal(err)
	}
	set, err := sink.NewChains(store(m.h), sink.Options{Sinks: []sink.Sink{{Name: "file", Exporter: m.x}}, Member: "m1", Batch: 4, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.e, err = engine.New(t.Context(), m.h, engine.Options{Routes: meters, StoreName: "memory", Journal: j, Observer: set}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		m.e.Close()
		m.h.Close()
		j.Close()
		set.Close(context.Background())
	})
	set.SetChains([]engine.Chain{{Member: "m1"}})
	go func() { defer close(done); set.Run(runCtx) }()
	return m
}

// decide has the member decide n readings, one a batch.
func (m *journaledSink) decide(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		msg := engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":0.25}`, m.next)}
		m.next++
		if _, err := m.e.Process(t.Context(), []engine.Message{msg}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkDelivered requires the chain to hold head records and the record
// the sink last delivered at each of its positions to be the one the
// chain holds there; why adds to each failure.
func (m *journaledSink) checkDelivered(t *testing.T, head uint64, why string) {
	t.Helper()
	last := map[uint64]engine.AuditRecord{} // the record last delivered at each position
	for _, r := range m.x.records() {
		last[r.Position] = r
	}
	n := 0
	err := m.h.ScanChain(t.Context(), "m1", 1, func(r engine.AuditRecord) error {
		n++
		if got, ok := last[r.Position]; !ok || got.Hash != r.Hash {
			t.Errorf("position %d%s: the sink last delivered %s (%q), the chain holds %s (%q)", r.Position, why, got.Hash, got.Reason, r.Hash, r.Reason)
		}
		return nil
	})
	if err != nil || uint64(n) != head {
		t.Fatalf("the chain: %d records, head %d: %v", n, head, err)
	}
}
