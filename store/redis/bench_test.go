package redis

import (
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// BenchmarkUpdate runs batches of id-route messages, each applied and
// adding to one of 50 meters, through an engine over one member on a
// durable server (appendfsync always), and reports messages per second.
// Building the messages is not timed.
func BenchmarkUpdate(b *testing.B) {
	srv := testbroker.StartRedis(b, testbroker.RedisOptions{})
	for _, size := range []int{500, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			g := newGroup(srv)
			s, err := Open(b.Context(), Options{URL: srv.URL(), Member: "bench", Prefix: g.prefix})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			e := newEngine(b, s)
			msgs := make([]engine.Message, size)
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for i := range msgs {
					n++
					msgs[i] = meterMsg(n%50, fmt.Sprint("m-", n))
				}
				b.StartTimer()
				d, err := e.Process(b.Context(), msgs)
				if err != nil {
					b.Fatal(err)
				}
				if d[size-1].Outcome != engine.Applied {
					b.Fatalf("decided %v", d[size-1].Outcome)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msg/s")
			if st := s.SharedStats(); st.Retries != 0 || st.Updates < uint64(b.N) {
				b.Fatalf("stats %+v: want an update per batch and no retries with one member", st)
			}
		})
	}
}
