package redis

import (
	"context"
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// discard is a sink exporter that takes every record at once.
type discard struct{}

func (discard) Export(context.Context, []engine.AuditRecord) error { return nil }
func (discard) Close(context.Context) error                        { return nil }

// BenchmarkSinkCatchUp has an audit sink deliver, from position 1, a
// member's chain of 50,000 records committed in batches of 1000 (as
// ingest commits them), to an exporter that takes them at once: what
// remains is the store's chain reads and cursor writes. Each iteration is
// a new sink (a new cursor). Reports records per second.
func BenchmarkSinkCatchUp(b *testing.B) {
	const records, batch = 50_000, 1000
	srv := testbroker.StartRedis(b, testbroker.RedisOptions{})
	g := newGroup(srv)
	s, err := Open(b.Context(), Options{URL: srv.URL(), Member: "bench", Prefix: g.prefix})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	e := newEngine(b, s)
	msgs := make([]engine.Message, batch)
	for n := 0; n < records; {
		for i := range msgs {
			n++
			msgs[i] = meterMsg(n%50, fmt.Sprint("m-", n))
		}
		if _, err := e.Process(b.Context(), msgs); err != nil {
			b.Fatal(err)
		}
	}
	head, err := s.Head(b.Context())
	if err != nil || head.Position != records {
		b.Fatalf("head %d, %v; want %d", head.Position, err, records)
	}
	i := 0
	for b.Loop() {
		i++
		set, err := sink.NewChains(s, sink.Options{Sinks: []sink.Sink{{Name: fmt.Sprint("s", i), Exporter: discard{}}}})
		if err != nil {
			b.Fatal(err)
		}
		set.SetChains([]engine.Chain{{Member: "bench", Head: head}})
		if err := set.Flush(b.Context()); err != nil {
			b.Fatal(err)
		}
		if st := set.Status(); st[0].Delivered != records {
			b.Fatalf("delivered %d", st[0].Delivered)
		}
	}
	b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
}
