package sparkplug_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// FuzzDecode feeds arbitrary payloads to the decoder and, on every message
// type, to an engine with a sparkplug route: each is decided (malformed,
// held or applied) and never panics. The seed corpus in testdata/fuzz
// holds an edge's birth, data, device and death payloads; the seeds here
// add a store-and-forward NDATA, one metric several times, some values
// flagged historical.
func FuzzDecode(f *testing.F) {
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	stored := historical(f, edge.Data(c.next(), []sparkplug.Metric{temperature(18), energy(0.25), temperature(25), energy(1)}), 0, 1)
	for _, m := range []sparkplug.Message{edge.Birth(c.next(), meterMetrics), edge.Data(c.next(), pulse()),
		edge.DeviceBirth("pump", c.next(), meterMetrics), edge.Death(c.next()), stored} {
		f.Add(m.Payload, uint8(0))
	}
	route := plantRoute // and what a route reads of a metric beside its value
	route.Effects = append(append([]engine.EffectSpec(nil), plantRoute.Effects...), engine.EffectSpec{Entity: "stamp/{topic[3]}",
		Set: map[string]string{"at": "timestamp.Temperature", "stored": "is_historical.Temperature"}, Max: map[string]string{"latest": "timestamp.Energy"}})
	e, err := engine.New(context.Background(), memory.New(), engine.Options{Routes: []engine.Route{route}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}}})
	if err != nil {
		f.Fatal(err)
	}
	defer e.Close()
	topics := []string{"spBv1.0/plant/NBIRTH/m1", "spBv1.0/plant/NDATA/m1", "spBv1.0/plant/DBIRTH/m1/pump",
		"spBv1.0/plant/DDATA/m1/pump", "spBv1.0/plant/DDEATH/m1/pump", "spBv1.0/plant/NDEATH/m1"}
	f.Fuzz(func(t *testing.T, payload []byte, typ uint8) {
		p, err := sparkplug.Decoder{}.DecodeSparkplug(payload)
		if err == nil && p.HasBdSeq && p.BdSeq > 255 && p.Metrics == nil {
			t.Fatalf("bdSeq without a metric: %+v", p)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := e.Process(ctx, []engine.Message{{Topic: topics[int(typ)%len(topics)], Payload: payload}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 {
			t.Fatalf("%d decisions for one message", len(out))
		}
	})
}
