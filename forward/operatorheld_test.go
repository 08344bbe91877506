package forward_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
)

// holdStuckEntry runs a rig whose receiver refuses update 2 for ever,
// waits for the lane to stop at it, and has an operator hold it through
// the rig's engine (as the API's and the dashboard's Hold do); it returns
// the rig once the updates behind it are delivered.
func holdStuckEntry(t *testing.T) *rig {
	t.Helper()
	srv, delivered := refusingReceiver(t, "2")
	wh, err := forward.NewWebhook(forward.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{MinBackoff: time.Hour, MaxBackoff: time.Hour, Poll: time.Hour})
	r.run()
	ctx := context.Background()
	decs, err := r.eng.Process(ctx, []engine.Message{incident("e7", 1), incident("e7", 2), incident("e7", 3)})
	if err != nil {
		t.Fatal(err)
	}
	stuck := engine.OutboxID(decs[1].Position, 0)
	waitFor(t, "the lane waits at the refused entry", func() bool {
		st := r.d.Status()
		return len(st.Outputs) == 1 && st.Outputs[0].Stuck.ID == stuck
	})
	if _, err := r.eng.HoldPending(ctx, "", stuck, "dispatch answers 503 to this update alone", "duty officer"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the updates behind the held one are delivered", func() bool { return delivered() == "1,3" })
	return r
}

// TestAnEntryAnOperatorHoldsIsCountedAmongItsOutputsHeld: the held count
// of an output (the dashboard's "held" column, /api/v1/forward) counts the
// entries an operator held through this process, not only those the
// downstream refused for good: both are held, audited forward_held, and
// wait for a retry or a drop, so an operator sees as many held as there are.
func TestAnEntryAnOperatorHoldsIsCountedAmongItsOutputsHeld(t *testing.T) {
	r := holdStuckEntry(t)
	held, err := r.store.OutboxHeld(context.Background())
	if err != nil || len(held) != 1 {
		t.Fatalf("held entries in the store: %v (%v), want 1", held, err)
	}
	waitFor(t, "the output counts the held entry", func() bool {
		st := r.d.Status()
		return len(st.Outputs) == 1 && st.Outputs[0].Held == 1
	})
}

// TestTheDepthLeavesAnEntryAnOperatorHoldsBeforeTheNextPoll: an entry an
// operator holds leaves the pending outbox in the hold's commit; the
// drainer's depth (replayguard_outbox_entries, the dashboard's pending
// bar, Admit's bound) must say so then, not stay one too high until the
// next poll recounts (an hour here).
func TestTheDepthLeavesAnEntryAnOperatorHoldsBeforeTheNextPoll(t *testing.T) {
	r := holdStuckEntry(t)
	n, err := r.store.OutboxDepth(context.Background(), "")
	if err != nil || n != 0 {
		t.Fatalf("pending entries in the store: %d (%v), want 0", n, err)
	}
	waitFor(t, "the depth to leave the held entry", func() bool { depth, _ := r.d.Depth(); return depth == 0 })
}
