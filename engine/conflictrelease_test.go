package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// TestAReleasedConflictNeverAppliesItsOtherContentAfterItsKeyAgedOut: a
// conflict is held because its key was proven applied with other content.
// Its release must not apply that other content however long it waited in
// quarantine: the key leaving the window forgets the proof, not the fact.
func TestAReleasedConflictNeverAppliesItsOtherContentAfterItsKeyAgedOut(t *testing.T) {
	ctx := context.Background()
	t.Run("id route", func(t *testing.T) {
		h := newHarness(t, engine.Options{TTL: time.Minute})
		if got := h.outcomes(meter("m3", "a", "1"), meter("m3", "a", "5")); got != "applied conflict" {
			t.Fatalf("got %s", got)
		}
		h.clock = h.clock.Add(2 * time.Minute)
		h.feed(meter("m3", "b", "0")) // the key of "a" ages out
		d, err := h.e.Release(ctx, heldIDs(t, h)[0], "")
		if err != nil || d.Outcome != engine.Duplicate {
			t.Fatalf("release: %s (%s) %v, want duplicate; state %s", d.Outcome, d.Reason, err, h.state())
		}
	})
	t.Run("sequenced route, below the window", func(t *testing.T) {
		h := newHarness(t, engine.Options{TTL: time.Minute, SequenceSpan: 64})
		h.feed(inc("fd", "e1", 1, 1, `"incident_id":1,"casualty_delta":1`), inc("fd", "e1", 1, 1, `"incident_id":1,"casualty_delta":5`))
		h.clock = h.clock.Add(2 * time.Minute)
		h.feed(inc("fd", "e1", 1, 100, ""))
		d, err := h.e.Release(ctx, heldIDs(t, h)[0], "")
		if err != nil || d.Outcome != engine.Duplicate {
			t.Fatalf("release: %s (%s) %v, want duplicate; state %s", d.Outcome, d.Reason, err, h.state())
		}
	})
}
