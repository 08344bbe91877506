package sparkplug_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/embedded"
	"github.com/replayguard/replayguard/store/postgres"
	"github.com/replayguard/replayguard/store/redis"
)

// hundredMetrics are a birth's 100 metrics; shift numbers their aliases
// from shift+1, so that two births with another shift give other tables.
func hundredMetrics(shift uint64) []sparkplug.Metric {
	ms := make([]sparkplug.Metric, 100)
	for i := range ms {
		ms[i] = sparkplug.Metric{Name: fmt.Sprintf("Line %d/Meter %d/Energy", i/100, i), Alias: shift + uint64(i) + 1,
			Datatype: sparkplug.Double, Value: float64(i)}
	}
	return ms
}

// BenchmarkABatchOfALongLivedEdge is the cost of a batch of 64 NDATA (10
// metrics by alias) of an edge whose session row is as large as
// window.keep_epochs 64 lets it grow: 130 sessions (65 kept, 65 retired),
// each born with 100 metrics, and a device of the last one born 65 times
// with 100 metrics, under two tables in turn. It reports the size of the
// edge's stored row.
func BenchmarkABatchOfALongLivedEdge(b *testing.B) {
	b.Run("embedded", func(b *testing.B) {
		s, err := embedded.Open(b.TempDir(), embedded.Options{})
		if err != nil {
			b.Fatal(err)
		}
		benchLongLivedEdge(b, s)
	})
	b.Run("postgres", func(b *testing.B) {
		pg := testbroker.StartPostgres(b, testbroker.PostgresOptions{})
		s, err := postgres.Open(b.Context(), postgres.Options{URL: pg.URL(), Member: "m1", Schema: "bench", TTL: keyTTL})
		if err != nil {
			b.Fatal(err)
		}
		benchLongLivedEdge(b, s)
	})
	b.Run("redis", func(b *testing.B) {
		srv := testbroker.StartRedis(b, testbroker.RedisOptions{})
		s, err := redis.Open(b.Context(), redis.Options{URL: srv.URL(), Member: "m1", Prefix: "{bench}:"})
		if err != nil {
			b.Fatal(err)
		}
		benchLongLivedEdge(b, s)
	})
}

func benchLongLivedEdge(b *testing.B, s engine.Store) {
	defer s.Close()
	ctx := context.Background()
	route := engine.Route{Name: "plant", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[3]}", Set: map[string]string{"e0": "metrics.Line 0/Meter 0/Energy"}}}}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e, err := engine.New(ctx, s, engine.Options{Routes: []engine.Route{route}, Kinds: []engine.RouteKind{sparkplug.RouteKind{}},
		KeepEpochs: engine.MaxKeepEpochs, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	apply := func(ms ...sparkplug.Message) {
		b.Helper()
		msgs := make([]engine.Message, len(ms))
		for i, m := range ms {
			msgs[i] = engine.Message{Topic: m.Topic, Payload: m.Payload}
		}
		out, err := e.Process(ctx, msgs)
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range out {
			if d.Outcome != engine.Applied {
				b.Fatalf("%s: %s", d.Outcome, d.Reason)
			}
		}
	}
	for range 2 * (engine.MaxKeepEpochs + 1) {
		edge.NewSession()
		apply(edge.Birth(c.next(), hundredMetrics(0)))
	}
	for i := range engine.MaxKeepEpochs + 1 {
		apply(edge.DeviceBirth("d1", c.next(), hundredMetrics(uint64(i%2)*100)))
	}
	ten := hundredMetrics(0)[:10]
	const batch = 64
	msgs := make([]sparkplug.Message, batch)
	b.ResetTimer()
	for b.Loop() {
		for i := range msgs {
			msgs[i] = edge.Data(c.next(), ten)
		}
		apply(msgs...)
	}
	b.StopTimer()
	b.ReportMetric(float64(rowBytes(b, s)), "row-bytes")
}

// rowBytes is the size of the row of the store's one source, encoded.
func rowBytes(b *testing.B, s engine.Store) int {
	n := 0
	err := s.(engine.RowScanner).ScanSources(context.Background(), func(src engine.SourceState) error {
		row, err := src.MarshalBinary()
		n += len(row)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
