package sparkplug_test

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// TestDataWithoutADatatypeOutsideItsBirthsRangeIsHeld: a metric sent by
// alias without a datatype is read with the datatype its birth gave. An
// integer out of that datatype's range (1000 for an Int8, 1004 for a
// UInt8) is no value of it: it was read as -24, and as 1004, and applied.
// It is held, saying so, and the metric keeps its value.
func TestDataWithoutADatatypeOutsideItsBirthsRangeIsHeld(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		birth := []sparkplug.Metric{{Name: "Temperature", Datatype: pb.DataType_Int8, Value: int64(-5)},
			{Name: "Pulses", Datatype: pb.DataType_UInt8, Value: int64(0)}}
		h.expect(engine.Applied, edge.Birth(c.next(), birth))
		h.expect(engine.Applied, edge.Data(c.next(), []sparkplug.Metric{{Name: "Temperature", Value: int64(-128)}}))
		if got := h.field("meter/m1", "temp"); got != "-128" {
			t.Fatalf("temp %s after -128 sent 64 bits wide, want -128", got)
		}
		for _, m := range []struct {
			metric sparkplug.Metric
			want   string
		}{
			{sparkplug.Metric{Name: "Temperature", Value: int64(1000)}, `metric "Temperature": the integer 1000 is out of the range of its datatype Int8 from its birth`},
			{sparkplug.Metric{Name: "Pulses", Value: int64(1004)}, `metric "Pulses": the integer 1004 is out of the range of its datatype UInt8 from its birth`},
		} {
			d := h.expect(engine.Quarantined, edge.Data(c.next(), []sparkplug.Metric{m.metric}))
			if !strings.Contains(d[0].Reason, m.want) {
				t.Fatalf("reason %q, want %q", d[0].Reason, m.want)
			}
		}
		if got := h.field("meter/m1", "temp"); got != "-128" {
			t.Fatalf("temp %s, want -128 still", got)
		}
	})
}
