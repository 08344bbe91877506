package sparkplug_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// An edge reconnecting after an outage forwards the readings it stored,
// flagged is_historical, often several of one metric in one NDATA beside
// its current value. An add, max or min counts each value the payload
// carries: delayed energy is still energy.

// storeAndForwardRoute sets a meter's temperature and state and sums its
// energy.
var storeAndForwardRoute = engine.Route{
	Name: "plant", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[3]}",
		Set: map[string]string{"temp": "metrics.Temperature", "state": "metrics.State"},
		Add: map[string]string{"kwh": "metrics.Energy"},
		Max: map[string]string{"peak": "metrics.Temperature"}}},
}

var storeAndForwardMetrics = []sparkplug.Metric{
	{Name: "Energy", Datatype: sparkplug.Double, Value: 0.0},
	{Name: "Temperature", Datatype: sparkplug.Int32, Value: int64(20)},
	{Name: "State", Datatype: sparkplug.String, Value: "running"},
}

func newStoreAndForwardHarness(t *testing.T, store engine.Store) *harness {
	return newHarnessWith(t, store, func(o *engine.Options) { o.Routes = []engine.Route{storeAndForwardRoute} })
}

// historical flags the metrics at idx of m's payload is_historical.
func historical(t *testing.T, m sparkplug.Message, idx ...int) sparkplug.Message {
	t.Helper()
	var p pb.Payload
	if err := proto.Unmarshal(m.Payload, &p); err != nil {
		t.Fatal(err)
	}
	for _, i := range idx {
		p.Metrics[i].IsHistorical = proto.Bool(true)
	}
	b, err := proto.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	return sparkplug.Message{Topic: m.Topic, Payload: b}
}

func temperature(v int64) sparkplug.Metric {
	return sparkplug.Metric{Name: "Temperature", Datatype: sparkplug.Int32, Value: v}
}

func energy(v float64) sparkplug.Metric {
	return sparkplug.Metric{Name: "Energy", Datatype: sparkplug.Double, Value: v}
}

func TestThreeHistoricalEnergyValuesAndACurrentOneAddAllFour(t *testing.T) {
	onEveryStore(t, testThreeHistoricalEnergyValuesAndACurrentOneAddAllFour)
}

func testThreeHistoricalEnergyValuesAndACurrentOneAddAllFour(t *testing.T, store engine.Store) {
	h := newStoreAndForwardHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), storeAndForwardMetrics))
	m := historical(t, edge.Data(c.next(), []sparkplug.Metric{energy(0.25), energy(0.125), energy(0.5), energy(1)}), 0, 1, 2)
	h.expect(engine.Applied, m)
	h.expect(engine.Duplicate, m)
	if got := h.field("meter/m1", "kwh"); got != "1.875" {
		t.Fatalf("kwh %s, want 1.875: 0.25 + 0.125 + 0.5 stored during the outage, 1 now", got)
	}
}

// TestAPeakStoredDuringAnOutageIsTheMax: a max takes each value of a
// metric the payload carries, the highest of them, not the last.
func TestAPeakStoredDuringAnOutageIsTheMax(t *testing.T) {
	onEveryStore(t, testAPeakStoredDuringAnOutageIsTheMax)
}

func testAPeakStoredDuringAnOutageIsTheMax(t *testing.T, store engine.Store) {
	h := newStoreAndForwardHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), storeAndForwardMetrics))
	h.expect(engine.Applied, historical(t, edge.Data(c.next(), []sparkplug.Metric{temperature(30), temperature(21), temperature(22)}), 0, 1))
	if got := h.field("meter/m1", "peak"); got != "30" {
		t.Fatalf("peak %s, want 30: the highest of the birth's 20 and the 30, 21 and 22 of one NDATA", got)
	}
}

// TestStoredEnergyIsCountedOnceAcrossAGroup: members of a consumer group
// share the store. The NDATA that forwards an outage's energy, applied by
// one member, is a duplicate on the other, and each reads the same sum.
func TestStoredEnergyIsCountedOnceAcrossAGroup(t *testing.T) {
	open := memoryGroup(t)
	h1 := newStoreAndForwardHarness(t, open("m1"))
	h2 := newStoreAndForwardHarness(t, open("m2"))
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	birth := edge.Birth(c.next(), storeAndForwardMetrics)
	h1.expect(engine.Applied, birth)
	h2.expect(engine.Duplicate, birth)
	m := historical(t, edge.Data(c.next(), []sparkplug.Metric{energy(0.25), energy(0.125), energy(0.5), energy(1)}), 0, 1, 2)
	h2.expect(engine.Applied, m)
	h1.expect(engine.Duplicate, m)
	h2.expect(engine.Duplicate, m)
	for i, h := range []*harness{h1, h2} {
		if got := h.field("meter/m1", "kwh"); got != "1.875" {
			t.Fatalf("member %d: kwh %s, want 1.875", i+1, got)
		}
	}
}
