package sparkplug_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// withAlias gives every metric of an encoded payload the alias its name
// has in aliases, keeping the name.
func withAlias(t *testing.T, payload []byte, aliases map[string]uint64) []byte {
	t.Helper()
	var p pb.Payload
	if err := proto.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Metrics {
		a, ok := aliases[m.GetName()]
		if !ok {
			t.Fatalf("no alias for metric %q", m.GetName())
		}
		m.Alias = proto.Uint64(a)
	}
	b, err := proto.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Data whose metric names one metric and gives the alias the birth gave
// another could mean either: it is held, naming both, and the state is
// left as it was. A name and alias that agree are applied.
func TestDataWhoseNameAndAliasDisagreeWithTheBirthIsHeld(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		edge.ByName = true
		// meterMetrics: Energy alias 1, Pulses 2, Temperature 3.
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), meterMetrics))

		agree := edge.Data(c.next(), pulse())
		agree.Payload = withAlias(t, agree.Payload, map[string]uint64{"Pulses": 2})
		h.expect(engine.Applied, agree)
		if got := h.field("meter/m1", "pulses"); got != "1" {
			t.Fatalf("pulses %s after Pulses by name and its alias 2, want 1", got)
		}

		node := edge.Data(c.next(), pulse())
		node.Payload = withAlias(t, node.Payload, map[string]uint64{"Pulses": 3})
		dev := edge.DeviceData("pump", c.next(), pulse())
		dev.Payload = withAlias(t, dev.Payload, map[string]uint64{"Pulses": 1})
		for _, m := range []struct {
			msg  sparkplug.Message
			want string
		}{
			{node, `metric "Pulses" of edge "m1" has alias 3, which its birth certificate gives to "Temperature"`},
			{dev, `metric "Pulses" of device "pump" of edge "m1" has alias 1, which its birth certificate gives to "Energy"`},
		} {
			d := h.expect(engine.Quarantined, m.msg)
			if !strings.Contains(d[0].Reason, m.want) {
				t.Fatalf("reason %q, want it to say %q", d[0].Reason, m.want)
			}
		}
		for field, want := range map[string]string{"pulses": "1", "temp": "20", "kwh": "0"} {
			if got := h.field("meter/m1", field); got != want {
				t.Fatalf("%s %s after the held data, want %s", field, got, want)
			}
		}
	})
}
