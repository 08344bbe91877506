package sparkplug_test

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// After the NDEATH of the edge's current session, a data message above the
// session's highest cannot be that session's: it is the next session's,
// whose NBIRTH has not been decided yet (another member holds it, or the
// broker reordered them). It must be held, not applied in the dead
// session's window with its alias table; applied there, its replay after
// the NBIRTH is applied a second time.
func TestDataAfterTheSessionsDeathIsHeldUntilTheNextBirth(t *testing.T) {
	onEveryStore(t, testDataAfterTheSessionsDeathIsHeld)
}

func testDataAfterTheSessionsDeathIsHeld(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	for range 200 { // seq 1 … 200
		h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	}
	h.expect(engine.Applied, edge.Death(c.next()))
	edge.NewSession()
	birth := edge.Birth(c.next(), meterMetrics) // decided after the data below
	data := edge.Data(c.next(), pulse())        // seq 1 of session 1
	d := h.send(data)
	if d[0].Outcome != engine.Quarantined {
		t.Errorf("data of the next session before its NBIRTH: %s (%s) in epoch %s at seq %d, want quarantined",
			d[0].Outcome, d[0].Reason, d[0].Epoch, d[0].Sequence)
	}
	h.expect(engine.Applied, birth)
	h.send(data) // a failover replays it
	if got := h.field("meter/m1", "pulses"); got != "201" {
		t.Fatalf("pulses %s, want 201: the data message was applied twice", got)
	}
}
