package sparkplug_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// A metric carries its own timestamp (when it was acquired, which for a
// stored value is before the payload's) and its is_historical flag: a
// route reads them as timestamp.<Name> and is_historical.<Name>, value by
// value like the metric itself.

var metricFieldsRoute = engine.Route{
	Name: "plant", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[3]}",
		Set: map[string]string{"temp": "metrics.Temperature", "temp_at": "timestamp.Temperature", "stored": "is_historical.Temperature"},
		Max: map[string]string{"energy_at": "timestamp.Energy"}}},
}

// TestAMetricsOwnTimestampAndFlagAreRead: a set of timestamp.Temperature
// takes the timestamp of the value the set of metrics.Temperature takes,
// the current one, never the later-sent historical one's; a max of
// timestamp.Energy the latest of every Energy value's; a metric without a
// timestamp of its own leaves the field as it was.
func TestAMetricsOwnTimestampAndFlagAreRead(t *testing.T) {
	onEveryStore(t, testAMetricsOwnTimestampAndFlagAreRead)
}

func testAMetricsOwnTimestampAndFlagAreRead(t *testing.T, store engine.Store) {
	h := newHarnessWith(t, store, func(o *engine.Options) { o.Routes = []engine.Route{metricFieldsRoute} })
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, stampMetrics(t, edge.Birth(c.next(), storeAndForwardMetrics), 900, 900, 900))
	m := historical(t, edge.Data(c.next(), []sparkplug.Metric{energy(0.5), temperature(25), temperature(18), energy(1)}), 0, 2)
	h.expect(engine.Applied, stampMetrics(t, m, 1000, 3000, 2000, 2500))
	for field, want := range map[string]string{"temp": "25", "temp_at": "3000", "stored": "false", "energy_at": "2500"} {
		if got := h.field("meter/m1", field); got != want {
			t.Fatalf("%s %s, want %s", field, got, want)
		}
	}
	h.expect(engine.Applied, edge.Data(c.next(), []sparkplug.Metric{temperature(26)}))
	if got, temp := h.field("meter/m1", "temp_at"), h.field("meter/m1", "temp"); got != "3000" || temp != "26" {
		t.Fatalf("temp %s at %s after a Temperature without a timestamp of its own, want 26 at 3000 (left as it was)", temp, got)
	}
}

// stampMetrics gives the metrics of m's payload their own timestamps, in
// order (0 leaves one without).
func stampMetrics(t testing.TB, m sparkplug.Message, ts ...uint64) sparkplug.Message {
	t.Helper()
	var p pb.Payload
	if err := proto.Unmarshal(m.Payload, &p); err != nil {
		t.Fatal(err)
	}
	for i, s := range ts {
		if s != 0 {
			p.Metrics[i].Timestamp = proto.Uint64(s)
		}
	}
	b, err := proto.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	return sparkplug.Message{Topic: m.Topic, Payload: b}
}
