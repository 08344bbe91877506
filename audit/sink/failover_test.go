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
	g := memory.NewGroup(0, 0)
	h, err := g.Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	x := &hashExporter{}
	set, err := sink.NewChains(h, sink.Options{Sinks: []sink.Sink{{Name: "file", Exporter: x}}, Member: "m1", Batch: 4, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(ctx, h, engine.Options{Routes: meters, StoreName: "memory", Journal: j, Observer: set})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		e.Close()
		h.Close()
		j.Close()
		set.Close(context.Background())
	})
	set.SetChains([]engine.Chain{{Member: "m1"}})
	go func() { defer close(done); set.Run(runCtx) }()
	next := 0
	decide := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			msg := engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":0.25}`, next)}
			next++
			if _, err := e.Process(ctx, []engine.Message{msg}); err != nil {
				t.Fatal(err)
			}
		}
	}
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

	last := map[uint64]engine.AuditRecord{} // the record last delivered at each position
	for _, r := range x.records() {
		last[r.Position] = r
	}
	n := 0
	err = h.ScanChain(ctx, "m1", 1, func(r engine.AuditRecord) error {
		n++
		if got, ok := last[r.Position]; !ok || got.Hash != r.Hash {
			t.Errorf("position %d: the sink last delivered %s (%q), the chain holds %s (%q)", r.Position, got.Hash, got.Reason, r.Hash, r.Reason)
		}
		return nil
	})
	if err != nil || uint64(n) != head {
		t.Fatalf("the chain: %d records, head %d: %v", n, head, err)
	}
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
	g := memory.NewGroup(0, 0)
	h, err := g.Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	held := &heldCursors{Member: h, entered: make(chan uint64, 1), release: make(chan struct{})}
	x := &hashExporter{}
	set, err := sink.NewChains(held, sink.Options{Sinks: []sink.Sink{{Name: "file", Exporter: x}}, Member: "m1", Batch: 4, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(ctx, h, engine.Options{Routes: meters, StoreName: "memory", Journal: j, Observer: set})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		e.Close()
		h.Close()
		j.Close()
		set.Close(context.Background())
	})
	set.SetChains([]engine.Chain{{Member: "m1"}})
	go func() { defer close(done); set.Run(runCtx) }()
	next := 0
	decide := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			msg := engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":0.25}`, next)}
			next++
			if _, err := e.Process(ctx, []engine.Message{msg}); err != nil {
				t.Fatal(err)
			}
		}
	}
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

	last := map[uint64]engine.AuditRecord{} // the record last delivered at each position
	for _, r := range x.records() {
		last[r.Position] = r
	}
	n := 0
	err = h.ScanChain(ctx, "m1", 1, func(r engine.AuditRecord) error {
		n++
		if got, ok := last[r.Position]; !ok || got.Hash != r.Hash {
			t.Errorf("position %d (the stale batch's cursor was %d): the sink last delivered %s (%q), the chain holds %s (%q)",
				r.Position, stale, got.Hash, got.Reason, r.Hash, r.Reason)
		}
		return nil
	})
	if err != nil || uint64(n) != head {
		t.Fatalf("the chain: %d records, head %d: %v", n, head, err)
	}
}
