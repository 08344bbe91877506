package storetest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// drainedWhileRead is a store whose outbox delivers the first entry an
// operator's hold reads, once armed, between the read and the hold's
// commit: the forward drainer finishing an attempt under way.
type drainedWhileRead struct {
	engine.Store
	caps engine.Capabilities
}

func (s *drainedWhileRead) Capabilities() engine.Capabilities { return s.caps }

type drainingOutbox struct {
	engine.OutboxStore
	armed atomic.Bool
}

func (o *drainingOutbox) Outbox(ctx context.Context, member string, after uint64, limit int) ([]engine.OutboxEntry, error) {
	page, err := o.OutboxStore.Outbox(ctx, member, after, limit)
	if err == nil && len(page) > 0 && o.armed.CompareAndSwap(true, false) {
		err = o.OutboxStore.OutboxDone(ctx, member, []uint64{page[0].ID})
	}
	return page, err
}

// testOutboxEngineHoldDeliveredMeanwhile has an operator hold an entry the
// drainer delivers after the hold read it pending: the hold is refused as
// delivered meanwhile, with no forward_held record and nothing held.
func testOutboxEngineHoldDeliveredMeanwhile(t *testing.T, h *outboxHarness) {
	ob := &drainingOutbox{OutboxStore: h.ob(t)}
	caps := h.s.caps
	caps.Outbox = ob
	e, err := engine.New(t.Context(), &drainedWhileRead{Store: h.s.Store, caps: caps},
		engine.Options{Routes: forwardRoutes, SequenceSpan: 64, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.Process(t.Context(), []engine.Message{incidentMsg(1, "7", "")}); err != nil {
		t.Fatal(err)
	}
	entries := pending(t, ob, h.member)
	if len(entries) != 3 {
		t.Fatalf("%d entries, want 3", len(entries))
	}
	before := lastRecord(t, h)
	ob.armed.Store(true)
	res, err := e.HoldPending(t.Context(), "", entries[1].ID, "dispatch answers 503 to it alone", "duty officer")
	if !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "was delivered meanwhile") {
		t.Fatalf("HoldPending of an entry delivered meanwhile: record %s of entry %d, err %v; want ErrNotFound saying it was delivered meanwhile", res.Record.Outcome, res.Record.Ref, err)
	}
	if last := lastRecord(t, h); last.Position != before.Position {
		t.Fatalf("a refused hold wrote an audit record: %+v", last)
	}
	if hs := held(t, ob); len(hs) != 0 {
		t.Fatalf("held after a refused hold: %+v", hs)
	}
	equalEntries(t, "pending after the delivery", pending(t, ob, h.member), []engine.OutboxEntry{entries[0], entries[2]})
	// The engine goes on: a hold of an entry still pending is granted.
	if _, err := e.HoldPending(t.Context(), "", entries[2].ID, "dispatch answers 503 to it alone", "duty officer"); err != nil {
		t.Fatalf("HoldPending after the refusal: %v", err)
	}
	if last := lastRecord(t, h); last.Outcome != engine.OutcomeForwardHeld || last.Ref != entries[2].ID {
		t.Fatalf("the granted hold's audit record: %+v", last)
	}
}

// heldWhileCommitting is a store that stops the commit of an operator's
// hold until released, once armed, and says when that commit starts.
type heldWhileCommitting struct {
	drainedWhileRead
	armed      atomic.Bool
	committing chan struct{}
	release    chan struct{}
}

func (s *heldWhileCommitting) Commit(ctx context.Context, b *engine.Batch) error {
	if len(b.OutboxHeld) > 0 && b.OutboxHeld[0].Pending && s.armed.CompareAndSwap(true, false) {
		close(s.committing)
		<-s.release
	}
	return s.Store.Commit(ctx, b)
}

// testOutboxEngineHoldDeliveredMeanwhileKeepsDecisions has an operator's
// hold of an entry the drainer delivered meanwhile refused while a
// consumer's batch is being decided: the consumer's batch commits, as it
// would had the hold never been asked for.
func testOutboxEngineHoldDeliveredMeanwhileKeepsDecisions(t *testing.T, h *outboxHarness) {
	ob := &drainingOutbox{OutboxStore: h.ob(t)}
	caps := h.s.caps
	caps.Outbox = ob
	s := &heldWhileCommitting{drainedWhileRead: drainedWhileRead{Store: h.s.Store, caps: caps},
		committing: make(chan struct{}), release: make(chan struct{})}
	deciding := make(chan struct{})
	var watch atomic.Bool
	now := func() time.Time {
		if watch.CompareAndSwap(true, false) {
			close(deciding)
		}
		return time.Now()
	}
	e, err := engine.New(t.Context(), s, engine.Options{Routes: forwardRoutes, SequenceSpan: 64, TTL: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.Process(t.Context(), []engine.Message{incidentMsg(1, "7", "")}); err != nil {
		t.Fatal(err)
	}
	entries := pending(t, ob, h.member)
	if len(entries) != 3 {
		t.Fatalf("%d entries, want 3", len(entries))
	}
	ob.armed.Store(true)
	s.armed.Store(true)
	holdErr := make(chan error, 1)
	go func() {
		_, err := e.HoldPending(t.Context(), "", entries[1].ID, "dispatch answers 503 to it alone", "duty officer")
		holdErr <- err
	}()
	<-s.committing
	watch.Store(true)
	type outcome struct {
		ds  []engine.Decision
		err error
	}
	processed := make(chan outcome, 1)
	go func() {
		ds, err := e.Process(t.Context(), []engine.Message{incidentMsg(2, "", "")})
		processed <- outcome{ds, err}
	}()
	// The consumer's batch is decided while the hold commits, or waits for
	// it: nothing tells the second apart from a batch not started yet, so
	// it is given a moment before the hold's commit goes on.
	select {
	case <-deciding:
	case <-time.After(200 * time.Millisecond):
	}
	close(s.release)
	if err := <-holdErr; !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("HoldPending of an entry delivered meanwhile: %v; want ErrNotFound", err)
	}
	got := <-processed
	if got.err != nil {
		t.Fatalf("a consumer's batch decided while a refused hold committed: %v; want it committed", got.err)
	}
	if len(got.ds) != 1 || got.ds[0].Outcome != engine.Applied {
		t.Fatalf("decisions %+v; want one applied", got.ds)
	}
}
