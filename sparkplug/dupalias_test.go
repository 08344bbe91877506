package sparkplug_test

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// A birth that gives one alias to two metrics leaves data by that alias
// ambiguous: it must not be read as whichever metric came last.
func TestABirthWithOneAliasForTwoMetricsIsNotApplied(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		d := h.send(edge.Birth(c.next(), []sparkplug.Metric{
			{Name: "Energy", Alias: 1, Datatype: sparkplug.Double, Value: 0.0},
			{Name: "Pulses", Alias: 1, Datatype: sparkplug.Int64, Value: int64(0)},
		}))
		if d[0].Outcome.Effective() {
			t.Errorf("a birth with alias 1 twice: %s", d[0].Outcome)
		}
		h.send(edge.Data(c.next(), []sparkplug.Metric{{Name: "Energy", Value: 7.0}}))
		if got := h.field("meter/m1", "pulses"); got != "" {
			t.Fatalf("pulses %s: Energy sent by alias 1 was added to Pulses", got)
		}
	})
}
