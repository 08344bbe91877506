package sparkplug_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

func tenMetrics() []sparkplug.Metric {
	var ms []sparkplug.Metric
	for i := range 10 {
		ms = append(ms, sparkplug.Metric{Name: fmt.Sprintf("Line/Meter %d/Energy", i), Datatype: sparkplug.Double, Value: float64(i) + 0.25})
	}
	return ms
}

// BenchmarkDecodeNDATA is the decoder's cost for an NDATA of 10 metrics by alias.
func BenchmarkDecodeNDATA(b *testing.B) {
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	edge.Birth(c.next(), tenMetrics())
	m := edge.Data(c.next(), tenMetrics())
	b.SetBytes(int64(len(m.Payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (sparkplug.Decoder{}).DecodeSparkplug(m.Payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideNDATA is the engine's whole path (decode, place, decide,
// project, commit to the memory store) for NDATA of 10 metrics, 64 a batch.
func BenchmarkDecideNDATA(b *testing.B) {
	route := engine.Route{Name: "plant", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[3]}", Set: map[string]string{"e0": "metrics.Line/Meter 0/Energy", "e9": "metrics.Line/Meter 9/Energy"}}}}
	e, err := engine.New(context.Background(), memory.New(), engine.Options{Routes: []engine.Route{route}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	birth := edge.Birth(c.next(), tenMetrics())
	if _, err := e.Process(context.Background(), []engine.Message{{Topic: birth.Topic, Payload: birth.Payload}}); err != nil {
		b.Fatal(err)
	}
	const batch = 64
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		msgs := make([]engine.Message, batch)
		for i := range msgs {
			m := edge.Data(c.next(), tenMetrics())
			msgs[i] = engine.Message{Topic: m.Topic, Payload: m.Payload}
		}
		out, err := e.Process(context.Background(), msgs)
		if err != nil {
			b.Fatal(err)
		}
		if out[0].Outcome != engine.Applied {
			b.Fatalf("%s: %s", out[0].Outcome, out[0].Reason)
		}
		n += batch
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/msg")
}
