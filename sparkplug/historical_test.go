package sparkplug_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// An edge reconnecting after an outage forwards the readings it stored,
// flagged is_historical, often several of one metric in one NDATA beside
// its current value. A historical value is not the metric's current one
// (Sparkplug B 3.0, Metric is_historical: "should not be considered a
// real time/current value"): a set never takes it. An add, max or min
// counts each value the payload carries: delayed energy is still energy.

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
func historical(t testing.TB, m sparkplug.Message, idx ...int) sparkplug.Message {
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

// record reads the audit record of a decision from the harness's store.
func (h *harness) record(d engine.Decision) engine.AuditRecord {
	h.t.Helper()
	var rec engine.AuditRecord
	stop := errors.New("found")
	err := h.store.ScanAudit(context.Background(), d.Position, func(r engine.AuditRecord) error {
		rec = r
		return stop
	})
	if !errors.Is(err, stop) || rec.Position != d.Position {
		h.t.Fatalf("audit record %d: %v (read %d)", d.Position, err, rec.Position)
	}
	return rec
}

func TestAHistoricalTemperatureAfterACurrentOneLeavesTheCurrent(t *testing.T) {
	onEveryStore(t, testAHistoricalTemperatureAfterACurrentOneLeavesTheCurrent)
}

func testAHistoricalTemperatureAfterACurrentOneLeavesTheCurrent(t *testing.T, store engine.Store) {
	h := newStoreAndForwardHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), storeAndForwardMetrics))
	d := h.expect(engine.Applied, historical(t, edge.Data(c.next(), []sparkplug.Metric{temperature(25), temperature(18)}), 1))
	if got := h.field("meter/m1", "temp"); got != "25" {
		t.Fatalf("temp %s after a current 25 and a historical 18, want 25", got)
	}
	if want := "set temp: a historical value of metrics.Temperature not set, its current one is"; d[0].Reason != want {
		t.Fatalf("reason %q, want %q", d[0].Reason, want)
	}
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

// TestAHistoricalValueAloneIsNotSetAndTheRecordSaysSo: an NDATA whose
// only Temperature is historical leaves temp as it was, as an NDATA
// without Temperature does, and its audit record says why.
func TestAHistoricalValueAloneIsNotSetAndTheRecordSaysSo(t *testing.T) {
	onEveryStore(t, testAHistoricalValueAloneIsNotSetAndTheRecordSaysSo)
}

func testAHistoricalValueAloneIsNotSetAndTheRecordSaysSo(t *testing.T, store engine.Store) {
	h := newStoreAndForwardHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), storeAndForwardMetrics))
	d := h.expect(engine.Applied, historical(t, edge.Data(c.next(), []sparkplug.Metric{temperature(18), temperature(19)}), 0, 1))
	if got := h.field("meter/m1", "temp"); got != "20" {
		t.Fatalf("temp %s after two historical values, want the birth's 20", got)
	}
	want := "set temp: 2 historical values of metrics.Temperature not set, none current: the field is left as it was"
	if d[0].Reason != want {
		t.Fatalf("reason %q, want %q", d[0].Reason, want)
	}
	rec := h.record(d[0])
	if rec.Reason != want {
		t.Fatalf("audit reason %q, want %q", rec.Reason, want)
	}
	var set []engine.Change
	for _, ch := range rec.Effects {
		if ch.Field == "temp" {
			set = append(set, ch)
		}
	}
	if len(set) != 1 || !set[0].Historical || set[0].Lost || string(set[0].Value) != "19" || string(set[0].After) != "20" {
		t.Fatalf("effects on temp %+v, want one set of the historical 19, after 20, marked historical", set)
	}
}

// TestAReplayThatFlagsAValueHistoricalIsAConflict: the flag decides what a
// set does, so the digest covers it: a message sent again under an
// applied key with a value flagged historical is held, not suppressed.
func TestAReplayThatFlagsAValueHistoricalIsAConflict(t *testing.T) {
	onEveryStore(t, testAReplayThatFlagsAValueHistoricalIsAConflict)
}

func testAReplayThatFlagsAValueHistoricalIsAConflict(t *testing.T, store engine.Store) {
	h := newStoreAndForwardHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), storeAndForwardMetrics))
	m := edge.Data(c.next(), []sparkplug.Metric{temperature(25), temperature(18)})
	h.expect(engine.Applied, m)
	h.expect(engine.Conflict, historical(t, m, 1))
	h.expect(engine.Duplicate, m)
	if got := h.field("meter/m1", "temp"); got != "18" {
		t.Fatalf("temp %s, want 18, the last current value of the message applied", got)
	}
}

// TestAHistoricalSetIsRecordedOnSharedServers: on Redis and PostgreSQL,
// the audit record of a set of historical values alone keeps its reason
// and its change marked historical.
func TestAHistoricalSetIsRecordedOnSharedServers(t *testing.T) {
	onSharedServers(t, func(t *testing.T, newGroup func() func(string) engine.Store) {
		testAHistoricalValueAloneIsNotSetAndTheRecordSaysSo(t, newGroup()("m1"))
	})
}
