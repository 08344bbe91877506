package sparkplug_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// TestABirthDecidedAfterItsSessionsDeathStaysOfflineOnceTheDeathsKeyLeft:
// the NDEATH of an edge's next session is decided before that session's
// NBIRTH (in a group another member holds the NBIRTH, or the broker
// reordered them), and the NDEATH's key leaves the key window (window.ttl,
// or window.max_entries in a group) before the NBIRTH is decided. The
// session has ended all the same: the edge stays offline, and a replay of
// the NDEATH is its duplicate, not applied again.
func TestABirthDecidedAfterItsSessionsDeathStaysOfflineOnceTheDeathsKeyLeft(t *testing.T) {
	t.Run("ttl", func(t *testing.T) {
		h := newHarness(t, memory.New())
		testBirthAfterItsDeath(t, h, h, func(h *harness) { h.clock = h.clock.Add(engine.DefaultTTL + time.Hour) })
	})
	t.Run("max_entries, group", func(t *testing.T) {
		g := memory.NewGroup(keyTTL, 100)
		open := func(id string) *harness {
			m, err := g.Open(id)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return newHarness(t, m)
		}
		c := newClock()
		other := sparkplug.NewEdge("plant", "m2", 0)
		testBirthAfterItsDeath(t, open("a"), open("b"), func(h *harness) {
			h.expect(engine.Applied, other.Birth(c.next(), meterMetrics))
			for range 150 {
				h.expect(engine.Applied, other.Data(c.next(), pulse()))
			}
		})
	})
}

func testBirthAfterItsDeath(t *testing.T, a, b *harness, forget func(h *harness)) {
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	a.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	a.expect(engine.Applied, edge.Death(c.next()))
	edge.NewSession()
	birth := edge.Birth(c.next(), meterMetrics) // member a holds it ...
	death := edge.Death(c.next())
	b.expect(engine.Applied, death) // ... while member b decides the session's NDEATH
	forget(b)
	a.expect(engine.Applied, birth)
	if r := a.source("m1").Sparkplug; r.Online || r.BdSeq != 1 {
		t.Errorf("session %+v: want offline in session 1", r)
	}
	if d := b.send(death); d[0].Outcome != engine.Duplicate {
		t.Errorf("the session's NDEATH again: %s (%s), want duplicate", d[0].Outcome, d[0].Reason)
	}
}
