package main

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/embedded"
)

// BenchmarkSparkplugEngine is replayguard's own work on the Sparkplug
// rows' feed, without the broker and the MQTT client: the feed's 50,000
// deliveries (spRoute's route) decided by the engine in batches of 1024 and
// committed to a fresh embedded store (fsync per commit) in each iteration.
func BenchmarkSparkplugEngine(b *testing.B) {
	f := generateSparkplug(50000, spEdges, 0.1)
	route := engine.Route{Name: "plant", Kind: sparkplug.KindSparkplug, Topic: spTopicRoot,
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[3]}",
			Add: map[string]string{"kwh": "metrics.Energy"}, Set: map[string]string{"temperature": "metrics.Temperature"}}}}
	msgs := make([]engine.Message, len(f.msgs))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		st, err := embedded.Open(b.TempDir(), embedded.Options{})
		if err != nil {
			b.Fatal(err)
		}
		e, err := engine.New(context.Background(), st, engine.Options{Routes: []engine.Route{route}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}}})
		if err != nil {
			b.Fatal(err)
		}
		for i := range f.msgs {
			msgs[i] = engine.Message{Topic: f.msgs[i].Topic, Payload: f.msgs[i].Payload}
		}
		b.StartTimer()
		for i := 0; i < len(msgs); i += 1024 {
			if _, err := e.Process(context.Background(), msgs[i:min(i+1024, len(msgs))]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}
