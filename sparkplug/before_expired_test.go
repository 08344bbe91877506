package sparkplug_test

import (
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// TestDataAppliedInTheBirthBeforeItsOwnIsHeldOnceItsKeyLeftTheWindow:
// data of an edge's next birth decided before that birth's NBIRTH (the
// broker reordered them, or in a group another member held the NBIRTH)
// is applied in the birth before, above its highest. Its replay is found
// there while the key window holds its key (a duplicate); once the key
// has left (window.ttl passed, or window.max_entries newer keys came), its
// own birth's window never saw it: it is held, not applied a second time
// there. The birth's own messages stay as they were: one its window saw
// is a duplicate, the next one is applied.
func TestDataAppliedInTheBirthBeforeItsOwnIsHeldOnceItsKeyLeftTheWindow(t *testing.T) {
	t.Run("ttl", func(t *testing.T) {
		testDataAppliedBeforeItsBirthAfterItsKeyLeft(t, func() engine.Store { return memory.New() }, func(h *harness) {
			h.clock = h.clock.Add(engine.DefaultTTL + time.Hour)
		})
	})
	t.Run("max_entries, group", func(t *testing.T) {
		c := newClock()
		other := sparkplug.NewEdge("plant", "m2", 0)
		testDataAppliedBeforeItsBirthAfterItsKeyLeft(t, func() engine.Store {
			m, err := memory.NewGroup(keyTTL, 100).Open("m1")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}, func(h *harness) {
			h.expect(engine.Applied, other.Birth(c.next(), meterMetrics))
			for range 150 {
				h.expect(engine.Applied, other.Data(c.next(), pulse()))
			}
		})
	})
}

func testDataAppliedBeforeItsBirthAfterItsKeyLeft(t *testing.T, open func() engine.Store, forget func(h *harness)) {
	for _, tc := range nextBirths {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, open())
			c := newClock()
			edge := sparkplug.NewEdge("plant", "m1", 0)
			h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
			for range 200 { // seq 1 … 200: the next birth's seq 1 is placed above the highest
				h.expect(engine.Applied, edge.Data(c.next(), pulse()))
			}
			next := tc.next(edge, c)
			early := edge.Data(c.next(), pulse()) // decided before its NBIRTH
			h.expect(engine.Applied, early)
			h.expect(engine.Applied, next...)
			own := edge.Data(c.next(), pulse())
			h.expect(engine.Applied, own)
			h.expect(engine.Duplicate, early, own)
			forget(h)
			d := h.expect(engine.Quarantined, early)
			if !strings.Contains(d[0].Reason, "it may have been applied there") {
				t.Fatalf("reason %q", d[0].Reason)
			}
			h.expect(engine.Duplicate, own)
			h.expect(engine.Applied, edge.Data(c.next(), pulse()))
			if got := h.field("meter/m1", "pulses"); got != "203" {
				t.Fatalf("pulses %s, want 203: one NDATA had two effects", got)
			}
		})
	}
}
