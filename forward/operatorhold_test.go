package forward_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
)

// TestAnOperatorsHoldOfTheStuckEntryMovesTheLaneOnAtOnce: a receiver
// answers 503 to one update for ever; the lane waits at it, backing off
// for an hour, and the poll never comes (an hour too). An operator's hold
// of that entry, committed by the drainer's own engine (the CLI and the
// API go through it), must let the entries behind it go at once, not at
// the end of the backoff or the next poll.
func TestAnOperatorsHoldOfTheStuckEntryMovesTheLaneOnAtOnce(t *testing.T) {
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
	deadline := time.Now().Add(10 * time.Second)
	for delivered() != "1,3" {
		if time.Now().After(deadline) {
			t.Fatalf("10s after the hold the receiver has %q, want 1,3: the lane sleeps out its backoff (or waits for the poll) "+
				"before going on after the held entry", delivered())
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitFor(t, "the lane is no longer failing", func() bool { return r.d.Status().Warning() == "" })
}
