package sparkplug_test

import (
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAReplayedDeathOfAnEarlierSessionIsADuplicateOnceItsKeyLeftTheWindow:
// a failover's broker replays an edge's NDEATH of a session that has
// ended, the edge born again since (its birth still kept, or retired),
// after the NDEATH's key has left the key window (window.ttl passed, or
// window.max_entries newer keys came, in a group). The session's births
// record the NDEATH that ended it: the replay is a proven duplicate, its
// effects are not applied a second time, and the edge stays online in
// its current session. So is a late Will's, of a session before the
// first the edge was seen born in. Once the session's births are
// forgotten too, nothing proves the replay either way: it is held, never
// applied.
func TestAReplayedDeathOfAnEarlierSessionIsADuplicateOnceItsKeyLeftTheWindow(t *testing.T) {
	ttl := func(h *harness) { h.clock = h.clock.Add(engine.DefaultTTL + time.Hour) }
	for _, later := range []int{1, 3} { // its birth kept, or retired (window.keep_epochs 2)
		name := map[int]string{1: "kept birth", 3: "retired birth"}[later]
		t.Run(name+", ttl", func(t *testing.T) {
			testReplayedDeath(t, newHarness(t, memory.New()), later, ttl)
		})
		t.Run(name+", max_entries, group", func(t *testing.T) {
			m, err := memory.NewGroup(keyTTL, 100).Open("m1")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			c := newClock()
			other := sparkplug.NewEdge("plant", "m2", 0)
			testReplayedDeath(t, newHarness(t, m), later, func(h *harness) {
				h.expect(engine.Applied, other.Birth(c.next(), meterMetrics))
				for range 150 {
					h.expect(engine.Applied, other.Data(c.next(), pulse()))
				}
			})
		})
	}
	t.Run("a session not born here, ttl", func(t *testing.T) {
		h := newHarness(t, memory.New())
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 5)
		death := edge.Death(c.next()) // a late Will of a session before the first one seen
		edge.NewSession()
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		h.expect(engine.Applied, death)
		ttl(h)
		if d := h.send(death); d[0].Outcome != engine.Duplicate {
			t.Errorf("the late Will again: %s (%s), want duplicate", d[0].Outcome, d[0].Reason)
		}
		if r := h.source("m1").Sparkplug; !r.Online || r.BdSeq != 6 {
			t.Fatalf("session %+v, want online in session 6", r)
		}
	})
	t.Run("forgotten birth, ttl", func(t *testing.T) {
		h := newHarness(t, memory.New())
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		death := edge.Death(c.next())
		h.expect(engine.Applied, death)
		for range 3 { // the first session's birth retires
			edge.NewSession()
			h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
			h.expect(engine.Applied, edge.Death(c.next()))
		}
		ttl(h)
		edge.NewSession() // a birth that finds the retired ones retired longer than window.ttl
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		d := h.expect(engine.Quarantined, death)
		if !strings.HasPrefix(d[0].Reason, engine.ReasonOldEpoch) {
			t.Fatalf("held (%s), want %s", d[0].Reason, engine.ReasonOldEpoch)
		}
		if r := h.source("m1").Sparkplug; !r.Online || r.BdSeq != 4 {
			t.Fatalf("session %+v, want online in session 4", r)
		}
	})
}

func testReplayedDeath(t *testing.T, h *harness, later int, forget func(h *harness)) {
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	death := edge.Death(c.next())
	h.expect(engine.Applied, death)
	for i := range later {
		edge.NewSession()
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		h.expect(engine.Applied, edge.Data(c.next(), pulse()))
		if i < later-1 {
			h.expect(engine.Applied, edge.Death(c.next()))
		}
	}
	forget(h)
	if d := h.send(death); d[0].Outcome != engine.Duplicate {
		t.Errorf("the first session's NDEATH again: %s (%s), want duplicate", d[0].Outcome, d[0].Reason)
	}
	if r := h.source("m1").Sparkplug; !r.Online || r.BdSeq != int64(later) {
		t.Fatalf("session %+v, want online in session %d", r, later)
	}
}

// TestARebirthDecidedAfterItsSessionsDeathStaysOfflineOnceTheDeathsKeyLeft:
// a rebirth's NBIRTH decided after its session's NDEATH (in a group
// another member held it) opens a session that has already ended, also
// once the NDEATH's key has left the key window: the edge stays offline,
// and a replay of the NDEATH is its duplicate, not applied again.
func TestARebirthDecidedAfterItsSessionsDeathStaysOfflineOnceTheDeathsKeyLeft(t *testing.T) {
	h := newHarness(t, memory.New())
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	rebirth := edge.Birth(c.next(), meterMetrics) // decided after the NDEATH
	death := edge.Death(c.next())
	h.expect(engine.Applied, death)
	h.clock = h.clock.Add(engine.DefaultTTL + time.Hour)
	h.expect(engine.Applied, rebirth)
	if r := h.source("m1"); r.Epoch != "0.1" || r.Sparkplug.Online {
		t.Errorf("edge in epoch %s, session %+v: want offline in epoch 0.1", r.Epoch, r.Sparkplug)
	}
	if d := h.send(death); d[0].Outcome != engine.Duplicate {
		t.Errorf("the session's NDEATH again: %s (%s), want duplicate", d[0].Outcome, d[0].Reason)
	}
}

// TestADeathFromTheBdSeqsPreviousTurnIsHeld: an edge has gone past
// bdSeq 255; a failover's broker replays the NDEATH of a session 256
// before one to come. Its 8-bit bdSeq places it in the session after the
// current one, but it is stamped before births of earlier sessions: it
// is not that session's death, and must not take the edge offline.
// Released, it is applied, and changes no state.
func TestADeathFromTheBdSeqsPreviousTurnIsHeld(t *testing.T) {
	h := newHarness(t, memory.New())
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	var old sparkplug.Message
	for i := range 256 {
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		death := edge.Death(c.next())
		h.expect(engine.Applied, death)
		if i == 1 {
			old = death
		}
		edge.NewSession()
	}
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics)) // session 256, bdSeq 0
	d := h.expect(engine.Quarantined, old)
	if !strings.HasPrefix(d[0].Reason, engine.ReasonOldEpoch) {
		t.Errorf("held (%s), want %s", d[0].Reason, engine.ReasonOldEpoch)
	}
	if r := h.source("m1").Sparkplug; !r.Online || r.BdSeqUnwrapped != 256 {
		t.Fatalf("session %+v, want online in session 256", r)
	}
	// Released by an operator, it is applied, and changes no state.
	var ids []uint64
	if err := h.store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		ids = append(ids, q.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 {
		t.Fatalf("%d held, want 1", len(ids))
	}
	if d, err := h.e.Release(t.Context(), ids[0], "op"); err != nil || !d.Outcome.Effective() {
		t.Fatalf("released: %s (%s), %v; want applied", d.Outcome, d.Reason, err)
	}
	if r := h.source("m1").Sparkplug; !r.Online || r.BdSeqUnwrapped != 256 {
		t.Fatalf("session %+v after the release, want online in session 256", r)
	}
}
