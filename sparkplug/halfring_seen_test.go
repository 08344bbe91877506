package sparkplug_test

import (
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// TestAReplayMoreThanHalfTheRingBehindIsADuplicateOfWhatItsWindowSaw: once
// the key window has forgotten them (window.ttl), replays of an edge's
// NBIRTH and early data more than half the ring behind the highest are
// still found by the birth's window: their timestamps put them behind the
// highest, one placement congruent to their seq is left in the window, and
// the window saw it. They are duplicates, as a replay less than half the
// ring behind is. One the window never saw stays held.
func TestAReplayMoreThanHalfTheRingBehindIsADuplicateOfWhatItsWindowSaw(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		birth := edge.Birth(c.next(), meterMetrics)
		h.expect(engine.Applied, birth)
		var sent []sparkplug.Message
		for i := range 200 { // seq 1 … 200; seq 7 is lost
			m := edge.Data(c.next(), pulse())
			sent = append(sent, m)
			if i != 6 {
				h.expect(engine.Applied, m)
			}
		}
		h.clock = h.clock.Add(engine.DefaultTTL + time.Hour)
		h.expect(engine.Applied, edge.Data(c.next(), pulse())) // seq 201
		h.expect(engine.Duplicate, birth, sent[4], sent[150])
		d := h.expect(engine.Quarantined, sent[6])
		if !strings.Contains(d[0].Reason, "more than half the ring behind") {
			t.Fatalf("reason %q", d[0].Reason)
		}
		if got := h.field("meter/m1", "pulses"); got != "200" {
			t.Fatalf("pulses %s, want 200", got)
		}
	})
}
