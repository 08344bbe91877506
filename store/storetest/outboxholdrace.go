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
