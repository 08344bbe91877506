package sparkplug_test

import (
	"strconv"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// TestDataAppliedInTheBirthBeforeItsOwnIsADuplicateOnceThatBirthRetired:
// in a group, data of an edge's next birth decided before that birth's
// NBIRTH is applied in the birth before, above its highest (see
// TestDataDecidedBeforeItsBirthIsAppliedOnce). Once the birth before has
// retired (window.keep_epochs newer births came), a failover's replay of
// that data is still found where it was applied, a duplicate, whether its
// own birth is the oldest kept or has retired too; never applied a second
// time in its own birth's window, whose gap at its seq it would fill.
func TestDataAppliedInTheBirthBeforeItsOwnIsADuplicateOnceThatBirthRetired(t *testing.T) {
	t.Run("memory group", func(t *testing.T) {
		testDataAppliedInARetiredBirth(t, func() func(string) engine.Store { return memoryGroup(t) })
	})
	onSharedServers(t, testDataAppliedInARetiredBirth)
}

func testDataAppliedInARetiredBirth(t *testing.T, newGroup func() func(string) engine.Store) {
	for _, tc := range nextBirths {
		t.Run(tc.name, func(t *testing.T) {
			open := newGroup()
			a, b := newHarness(t, open("a")), newHarness(t, open("b"))
			c := newClock()
			edge := sparkplug.NewEdge("plant", "m1", 0)
			a.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
			for range 200 { // seq 1 … 200: the next birth's seq 1 is placed above the highest
				a.expect(engine.Applied, edge.Data(c.next(), pulse()))
			}
			held := tc.next(edge, c)             // member a holds these ...
			data := edge.Data(c.next(), pulse()) // ... while member b decides the data after them
			if d := b.send(data); d[0].Outcome != engine.Applied {
				t.Fatalf("the data before its NBIRTH: %s (%s), want it applied in the birth before", d[0].Outcome, d[0].Reason)
			}
			a.expect(engine.Applied, held...)
			a.expect(engine.Applied, edge.Data(c.next(), pulse())) // its birth's seq 2: seq 1 is a gap there
			pulses := 202
			for sessions := 1; sessions <= 3; sessions++ {
				a.expect(engine.Applied, edge.Death(c.next()))
				edge.NewSession()
				a.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
				a.expect(engine.Applied, edge.Data(c.next(), pulse()))
				pulses++
				if sessions == 1 {
					continue // the birth before still kept
				}
				for _, h := range []*harness{b, a} { // redelivered to either member
					if d := h.send(data); d[0].Outcome != engine.Duplicate {
						t.Errorf("after %d newer sessions: the data redelivered: %s (%s) in epoch %s at seq %d, want a duplicate",
							sessions, d[0].Outcome, d[0].Reason, d[0].Epoch, d[0].Sequence)
					}
				}
				if got, want := a.field("meter/m1", "pulses"), pulses; got != strconv.Itoa(want) {
					t.Fatalf("after %d newer sessions: pulses %s, want %d: one NDATA had two effects", sessions, got, want)
				}
			}
		})
	}
}
