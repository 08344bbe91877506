package deploy_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/store/memory"
)

// exported maps every replayguard_ series name /metrics can serve to its
// label names (a histogram's _bucket, _sum and _count included). It wires
// every collector `run` registers, over fakes that make each one report,
// and fails when a described metric is not gathered, so that the set is
// the code's, complete.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	reg := &recorder{Registry: prometheus.NewRegistry()} // as run's: the Watch methods add collectors after New registers them
	m := metrics.New(reg, "v1", "abc", "incidents")
	m.Watch(windows{})
	m.WatchQuarantine(memory.New())
	m.WatchStore("postgres", "rg-1", sharedStore{})
	m.WatchLoss("postgres", "rg-1", losses{})
	m.WatchJournal("postgres", "rg-1", journal{})
	m.WatchReady(func() bool { return true })
	m.Feed("a")
	m.JetStream(reg)
	m.Committed([]engine.AuditRecord{{Route: "incidents", Outcome: "applied", Ref: 1}}, nil) // an operator's release
	fm := metrics.NewForward(reg, "webhook")
	fm.WatchOutbox(outbox{})
	fm.ForwardLatency("webhook", time.Millisecond)
	set, err := sink.New(memory.New(), sink.Options{Sinks: []sink.Sink{{Name: "siem", Exporter: nopExporter{}}}})
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(set)
	ret := metrics.NewRetention(reg)
	ret.Pass(time.Unix(1_800_000_000, 0), 0)
	ret.Held(map[string]uint64{"collector": 400})

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "replayguard_") || len(f.GetMetric()) == 0 {
			continue
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		out[f.GetName()] = labels
		if f.GetMetric()[0].GetHistogram() != nil {
			out[f.GetName()+"_bucket"] = append(slices.Clone(labels), "le")
			out[f.GetName()+"_sum"] = labels
			out[f.GetName()+"_count"] = labels
		}
	}
	for _, name := range reg.described() {
		if _, ok := out[name]; !ok && strings.HasPrefix(name, "replayguard_") {
			t.Errorf("%s is described but not gathered: make exported feed it", name)
		}
	}
	return out
}

// recorder is a registry that remembers what was registered on it.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
	r.Registry.MustRegister(cs...)
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// described are the names of every metric the registered collectors
// describe.
func (r *recorder) described() []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range r.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

type windows struct{}

func (windows) Stats() engine.Stats {
	return engine.Stats{Keys: 1, Sources: 1, Entities: 1, Position: 1, OldestKey: time.Unix(1_800_000_000, 0).UnixNano()}
}

func (windows) CountGaps(context.Context) (int, int64, error) { return 1, 2, nil }

type sharedStore struct{}

func (sharedStore) SharedStats() engine.SharedStats {
	return engine.SharedStats{Updates: 1, Durable: true, LeaseExpires: time.Unix(1_800_000_000, 0), ClockMeasured: time.Unix(1_800_000_000, 0)}
}

type losses struct{}

func (losses) Loss() *engine.StoreLoss     { return nil }
func (losses) LossStats() engine.LossStats { return engine.LossStats{} }

type journal struct{}

func (journal) Size() (int64, time.Time) { return 4096, time.Unix(1_800_000_000, 0) }

type outbox struct{}

func (outbox) Depth() (int, int) { return 3, 100 }

type nopExporter struct{}

func (nopExporter) Export(context.Context, []engine.AuditRecord) error { return nil }
func (nopExporter) Close(context.Context) error                        { return nil }
func (nopExporter) Oversize() uint64                                   { return 0 } // as a syslog sink's
