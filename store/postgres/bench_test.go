package postgres_test

import (
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// BenchmarkUpdate runs batches of 500 id-route messages (meter readings,
// each adding to one of 50 meters) through an engine on one member, on a
// durable server (fsync and synchronous_commit on), and reports msg/s.
func BenchmarkUpdate(b *testing.B) {
	for _, size := range []int{500, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) { benchUpdate(b, size) })
	}
}

func benchUpdate(b *testing.B, size int) {
	pg := testbroker.StartPostgres(b, testbroker.PostgresOptions{})
	s, err := postgres.Open(b.Context(), postgres.Options{URL: pg.URL(), Member: "bench-1"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(b.Context(), s, engine.Options{Routes: []engine.Route{{
		Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	n := 0
	batch := func() []engine.Message {
		msgs := make([]engine.Message, size)
		for i := range msgs {
			n++
			msgs[i] = engine.Message{Topic: fmt.Sprintf("plant/meter-%d/energy", n%50),
				Payload: fmt.Appendf(nil, `{"msgId":"reading-%09d","kwh":0.25,"site":"north","unit":"kWh"}`, n)}
		}
		return msgs
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		msgs := batch()
		b.StartTimer()
		ds, err := e.Process(b.Context(), msgs)
		if err != nil {
			b.Fatal(err)
		}
		if ds[0].Outcome != engine.Applied {
			b.Fatalf("outcome %v", ds[0].Outcome)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msg/s")
	st := s.SharedStats()
	b.ReportMetric(st.UpdateSeconds/float64(st.Updates)*1000, "ms/update")
	if st.Retries != 0 || st.Failures != 0 {
		b.Fatalf("stats %+v", st)
	}
}
