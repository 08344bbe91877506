package metrics_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source"
)

func records(route string, outcomes ...string) []engine.AuditRecord {
	out := make([]engine.AuditRecord, len(outcomes))
	for i, o := range outcomes {
		out[i] = engine.AuditRecord{Route: route, Outcome: o}
	}
	return out
}

func TestDecisionsAndInFlightAccountForEveryDelivery(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "v1", "abc", "incidents", "meters")

	m.Observe(source.Event{Kind: source.Received, N: 14})
	m.Observe(source.Event{Kind: source.Abandoned, N: 2}) // the connection died before they were decided
	m.Committed(records("incidents", "applied", "applied", "applied_late", "duplicate", "conflict", "quarantined"), nil)
	m.Committed(records("meters", "applied", "duplicate"), nil)
	m.Committed(records("", "malformed"), nil)
	// An operator's release and discard act on held messages: not deliveries.
	m.Committed([]engine.AuditRecord{{Route: "incidents", Outcome: "applied", Ref: 6}}, nil)
	m.Committed([]engine.AuditRecord{{Route: "meters", Outcome: engine.OutcomeDiscarded, Ref: 9}}, nil)

	want := `
# HELP replayguard_received_total Deliveries taken from the source.
# TYPE replayguard_received_total counter
replayguard_received_total 14
# HELP replayguard_abandoned_total Deliveries left undecided and unacknowledged because shutdown could not commit them in time; the broker resends them.
# TYPE replayguard_abandoned_total counter
replayguard_abandoned_total 2
# HELP replayguard_in_flight Deliveries received whose decision is not committed yet: received_total - (sum(decisions_total) - store_recovered_total) - abandoned_total.
# TYPE replayguard_in_flight gauge
replayguard_in_flight 3
# HELP replayguard_decisions_total Deliveries decided and durably committed, by route and outcome.
# TYPE replayguard_decisions_total counter
replayguard_decisions_total{outcome="applied",route="incidents"} 2
replayguard_decisions_total{outcome="applied_late",route="incidents"} 1
replayguard_decisions_total{outcome="duplicate",route="incidents"} 1
replayguard_decisions_total{outcome="conflict",route="incidents"} 1
replayguard_decisions_total{outcome="quarantined",route="incidents"} 1
replayguard_decisions_total{outcome="malformed",route="incidents"} 0
replayguard_decisions_total{outcome="applied",route="meters"} 1
replayguard_decisions_total{outcome="applied_late",route="meters"} 0
replayguard_decisions_total{outcome="duplicate",route="meters"} 1
replayguard_decisions_total{outcome="conflict",route="meters"} 0
replayguard_decisions_total{outcome="quarantined",route="meters"} 0
replayguard_decisions_total{outcome="malformed",route="meters"} 0
replayguard_decisions_total{outcome="malformed",route="unrouted"} 1
# HELP replayguard_quarantine_resolved_total Held messages an operator released or discarded, by route and the outcome audited for it (applied, applied_late, duplicate, discarded).
# TYPE replayguard_quarantine_resolved_total counter
replayguard_quarantine_resolved_total{outcome="applied",route="incidents"} 1
replayguard_quarantine_resolved_total{outcome="discarded",route="meters"} 1
`
	names := []string{"replayguard_received_total", "replayguard_in_flight", "replayguard_abandoned_total",
		"replayguard_decisions_total", "replayguard_quarantine_resolved_total"}
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	checkIdentity(t, reg)

	// The three in flight are decided now.
	m.Committed(records("meters", "applied", "applied", "quarantined"), nil)
	checkIdentity(t, reg)
	inFlight := `
# HELP replayguard_in_flight Deliveries received whose decision is not committed yet: received_total - (sum(decisions_total) - store_recovered_total) - abandoned_total.
# TYPE replayguard_in_flight gauge
replayguard_in_flight 0
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(inFlight), "replayguard_in_flight"); err != nil {
		t.Fatal(err)
	}
}

// checkIdentity checks received = Σ decisions + abandoned + in flight from
// the gathered metrics alone, as an operator would.
func checkIdentity(t *testing.T, g prometheus.Gatherer) {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var received, decided, abandoned, inFlight float64
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			switch f.GetName() {
			case "replayguard_received_total":
				received += mt.GetCounter().GetValue()
			case "replayguard_decisions_total":
				decided += mt.GetCounter().GetValue()
			case "replayguard_abandoned_total":
				abandoned += mt.GetCounter().GetValue()
			case "replayguard_in_flight":
				inFlight += mt.GetGauge().GetValue()
			}
		}
	}
	if received != decided+abandoned+inFlight {
		t.Fatalf("received %v != decided %v + abandoned %v + in flight %v", received, decided, abandoned, inFlight)
	}
}

type fakeWindows struct{}

func (fakeWindows) Stats() engine.Stats {
	return engine.Stats{Keys: 42, MaxKeys: 1000, OldestKey: 1_796_000_000_500_000_000, Sources: 2, Entities: 5, Position: 99}
}

func (fakeWindows) CountGaps(context.Context) (int, int64, error) { return 2, 4, nil }

type fakeQuarantine struct {
	n   int
	err error
}

func (q fakeQuarantine) ScanQuarantine(ctx context.Context, fn func(engine.QuarantineEntry) error) error {
	for i := range q.n {
		if err := fn(engine.QuarantineEntry{ID: uint64(i + 1)}); err != nil {
			return err
		}
	}
	return q.err
}

func TestEngineStateIsReadAtScrapeTime(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "v1", "abc")
	names := []string{"replayguard_key_window_entries", "replayguard_key_window_max_entries", "replayguard_key_window_oldest_timestamp_seconds", "replayguard_sources", "replayguard_entities",
		"replayguard_gaps_open", "replayguard_audit_position", "replayguard_quarantine_open"}
	if n := testutil.CollectAndCount(m, names...); n != 0 {
		t.Fatalf("%d engine gauges before Watch, want none", n)
	}
	m.Watch(fakeWindows{})
	m.WatchQuarantine(fakeQuarantine{n: 3})
	want := `
# HELP replayguard_key_window_entries Keys in the key window.
# TYPE replayguard_key_window_entries gauge
replayguard_key_window_entries 42
# HELP replayguard_key_window_max_entries The key window's bound in keys (window.max_entries): once it holds that many, a key leaves it by count before its ttl.
# TYPE replayguard_key_window_max_entries gauge
replayguard_key_window_max_entries 1000
# HELP replayguard_key_window_oldest_timestamp_seconds When the oldest key in the key window was applied: an id route's replay of a message applied before it is applied again.
# TYPE replayguard_key_window_oldest_timestamp_seconds gauge
replayguard_key_window_oldest_timestamp_seconds 1.7960000005e+09
# HELP replayguard_sources Source windows (route, source) kept.
# TYPE replayguard_sources gauge
replayguard_sources 2
# HELP replayguard_entities Projected entities.
# TYPE replayguard_entities gauge
replayguard_entities 5
# HELP replayguard_gaps_open Sequences missing in the kept epochs of every sequenced source.
# TYPE replayguard_gaps_open gauge
replayguard_gaps_open 4
# HELP replayguard_audit_position Position of the last committed audit record.
# TYPE replayguard_audit_position gauge
replayguard_audit_position 99
# HELP replayguard_quarantine_open Messages held in quarantine for an operator.
# TYPE replayguard_quarantine_open gauge
replayguard_quarantine_open 3
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

func TestAQuarantineScanErrorFailsOnlyItsGauge(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "v1", "abc")
	m.WatchQuarantine(fakeQuarantine{err: errors.New("disk on fire")})
	_, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("gather error = %v, want the scan error", err)
	}
}

// unansweringStore is an engine on a shared store that does not answer:
// its windows are read from the store until the read gives up.
type unansweringStore struct{}

func (unansweringStore) Stats() engine.Stats { return engine.Stats{Position: 7, Shared: true} }

func (unansweringStore) CountGaps(ctx context.Context) (int, int64, error) {
	<-ctx.Done()
	return 0, 0, ctx.Err()
}

func TestAStoreThatDoesNotAnswerHoldsUpNoScrape(t *testing.T) {
	reg := prometheus.NewRegistry() // as run's: Watch adds to what New registered
	m := metrics.New(reg, "v1", "abc")
	m.Watch(unansweringStore{})
	t.Cleanup(m.Close)
	m.WatchReady(func() bool { return false })
	type gathered struct {
		fams map[string]float64
		err  error
	}
	done := make(chan gathered, 1)
	go func() {
		fams, err := reg.Gather()
		got := map[string]float64{}
		for _, f := range fams {
			got[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
		}
		done <- gathered{got, err}
	}()
	var g gathered
	select {
	case g = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the scrape waits for the store's windows: replayguard_ready and every other series are held back with them")
	}
	if g.err == nil || !errors.Is(g.err, context.DeadlineExceeded) && !strings.Contains(g.err.Error(), "deadline") {
		t.Errorf("gather error = %v, want the read's deadline", g.err)
	}
	if v, ok := g.fams["replayguard_ready"]; !ok || v != 0 {
		t.Errorf("replayguard_ready = %v (present %v), want 0", v, ok)
	}
	if v := g.fams["replayguard_audit_position"]; v != 7 {
		t.Errorf("replayguard_audit_position = %v, want 7", v)
	}
	for _, name := range []string{"replayguard_sources", "replayguard_gaps_open"} {
		if v, ok := g.fams[name]; ok {
			t.Errorf("%s = %v from windows that were not read, want it absent", name, v)
		}
	}
}

func TestSourceHooks(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "1.2.3", "deadbeef", "incidents")

	for _, e := range []source.Event{
		{Kind: source.Connected}, {Kind: source.Disconnected}, {Kind: source.ConnectFailed, Err: errors.New("refused")},
		{Kind: source.Connected}, {Kind: source.Stalled}, {Kind: source.Disconnected}, {Kind: source.Connected},
		{Kind: source.Received, N: 4},
		{Kind: source.CommitFailed, N: 4, Duration: time.Millisecond, Err: errors.New("io")},
		{Kind: source.Committed, N: 4, Duration: 3 * time.Millisecond},
		{Kind: source.Acked, N: 3, Lag: 20 * time.Millisecond},
		{Kind: source.AckDropped, N: 1},
		{Kind: source.SubscribeRefused, N: 2, Err: errors.New("not authorized")},
	} {
		m.Observe(e)
	}
	gap := &engine.Range{From: 4, To: 6}
	opened := records("incidents", "applied", "applied", "duplicate")
	opened[0].Gap, opened[1].Gap = gap, gap // two of the commit's decisions opened a gap
	m.Committed(opened, nil)
	m.Committed(records("incidents", "applied"), nil)
	m.Committed([]engine.AuditRecord{{Route: "incidents", Outcome: "discarded", Ref: 1}}, nil)

	want := `
# HELP replayguard_broker_connected 1 while the broker connection is up, else 0.
# TYPE replayguard_broker_connected gauge
replayguard_broker_connected 1
# HELP replayguard_reconnects_total Broker connections established after the first one.
# TYPE replayguard_reconnects_total counter
replayguard_reconnects_total 2
# HELP replayguard_connect_errors_total Failed attempts to connect to a broker.
# TYPE replayguard_connect_errors_total counter
replayguard_connect_errors_total 1
# HELP replayguard_stalls_total Connections dropped because the broker stopped answering keepalives.
# TYPE replayguard_stalls_total counter
replayguard_stalls_total 1
# HELP replayguard_subscribe_refusals_total SUBACKs that refused a subscription, granted one at QoS 0 or left one unanswered; after run's first grant, run is not ready and subscribes again.
# TYPE replayguard_subscribe_refusals_total counter
replayguard_subscribe_refusals_total 1
# HELP replayguard_ack_dropped_total Committed deliveries left unacknowledged (their connection dropped, or a stop could not commit those received before them); the broker resends them and they are found duplicate.
# TYPE replayguard_ack_dropped_total counter
replayguard_ack_dropped_total 1
# HELP replayguard_acked_total Deliveries acknowledged to the broker after their decision was committed.
# TYPE replayguard_acked_total counter
replayguard_acked_total 3
# HELP replayguard_store_errors_total Commits the store failed; the batch was not acknowledged and is retried or redelivered.
# TYPE replayguard_store_errors_total counter
replayguard_store_errors_total 1
# HELP replayguard_gaps_total Gap ranges opened: a sequenced source skipped one or more sequences.
# TYPE replayguard_gaps_total counter
replayguard_gaps_total 2
# HELP replayguard_build_info Always 1; the labels name the running build.
# TYPE replayguard_build_info gauge
replayguard_build_info{commit="deadbeef",version="1.2.3"} 1
`
	names := []string{"replayguard_broker_connected", "replayguard_reconnects_total", "replayguard_acked_total",
		"replayguard_connect_errors_total", "replayguard_stalls_total", "replayguard_subscribe_refusals_total", "replayguard_ack_dropped_total",
		"replayguard_store_errors_total", "replayguard_gaps_total", "replayguard_build_info"}
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, f := range fams {
		if h := f.GetMetric()[0].GetHistogram(); h != nil {
			counts[f.GetName()] = h.GetSampleCount()
		}
	}
	wantCounts := map[string]uint64{
		"replayguard_ack_lag_seconds":         3, // one per acknowledged delivery
		"replayguard_commit_duration_seconds": 2, // the failed attempt and the commit
		"replayguard_batch_size":              2, // commits with deliveries; the discard is none
	}
	for name, n := range wantCounts {
		if counts[name] != n {
			t.Errorf("%s observed %d times, want %d", name, counts[name], n)
		}
	}
}

func TestMetricNamesFollowPrometheusConventions(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "v1", "abc", "incidents")
	m.Watch(fakeWindows{})
	m.WatchQuarantine(fakeQuarantine{})
	m.WatchReady(func() bool { return true })
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestGapsAreCountedFromCommittedDeliveries(t *testing.T) {
	gapsTotal := func(n int) string {
		return `
# HELP replayguard_gaps_total Gap ranges opened: a sequenced source skipped one or more sequences.
# TYPE replayguard_gaps_total counter
replayguard_gaps_total ` + strconv.Itoa(n) + "\n"
	}
	gap := &engine.Range{From: 2, To: 3}
	t.Run("each committed delivery that opened a gap counts one", func(t *testing.T) {
		m := metrics.New(prometheus.NewPedanticRegistry(), "v1", "abc", "incidents")
		m.Committed([]engine.AuditRecord{{Route: "incidents", Outcome: "applied", Gap: gap}, {Route: "incidents", Outcome: "applied"}}, nil)
		m.Committed([]engine.AuditRecord{{Route: "incidents", Outcome: "applied_late", Gap: gap}}, nil)
		if err := testutil.CollectAndCompare(m, strings.NewReader(gapsTotal(2)), "replayguard_gaps_total"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an operator's release and a recovery are no delivery and count none", func(t *testing.T) {
		m := metrics.New(prometheus.NewPedanticRegistry(), "v1", "abc", "incidents")
		m.Committed([]engine.AuditRecord{{Route: "incidents", Outcome: "applied", Ref: 4, Gap: gap}}, nil)
		m.Committed([]engine.AuditRecord{{Outcome: engine.OutcomeRecovered, Gap: gap}}, nil)
		if err := testutil.CollectAndCompare(m, strings.NewReader(gapsTotal(0)), "replayguard_gaps_total"); err != nil {
			t.Fatal(err)
		}
	})
}

// slowWindows counts its windows in about took, and notes each count.
type slowWindows struct {
	took   time.Duration
	counts atomic.Int64
}

func (*slowWindows) Stats() engine.Stats { return engine.Stats{Sources: 3} }

func (w *slowWindows) CountGaps(context.Context) (int, int64, error) {
	time.Sleep(w.took)
	return 3, w.counts.Add(1), nil
}

// TestAFleetsWindowsAreNotCountedAtEveryScrape: counting the windows of a
// fleet of meters takes seconds; the scrapes that come soon after a count
// reuse it, and a later one counts again.
func TestAFleetsWindowsAreNotCountedAtEveryScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "v1", "abc")
	w := &slowWindows{took: 50 * time.Millisecond}
	m.Watch(w)
	gaps := func() float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "replayguard_gaps_open" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no replayguard_gaps_open")
		return 0
	}
	if g := gaps(); g != 1 || w.counts.Load() != 1 {
		t.Fatalf("first scrape: gaps %v after %d counts; want 1 after 1", g, w.counts.Load())
	}
	if g := gaps(); g != 1 || w.counts.Load() != 1 {
		t.Fatalf("a scrape right after: gaps %v after %d counts; want the first count reused", g, w.counts.Load())
	}
	time.Sleep(20*w.took + 100*time.Millisecond)
	if g := gaps(); g != 2 || w.counts.Load() != 2 {
		t.Fatalf("a scrape 20 counts' time later: gaps %v after %d counts; want a new count", g, w.counts.Load())
	}
}

// TestConcurrentScrapesOfAStoreThatDoesNotAnswer: two Prometheus servers
// (an HA pair) and an operator's curl scrape at once while the shared
// store does not answer; each scrape gives up on the windows within the
// read's own timeout, none waits for the others' reads in turn.
func TestConcurrentScrapesOfAStoreThatDoesNotAnswer(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "v1", "abc")
	m.Watch(unansweringStore{})
	t.Cleanup(m.Close)
	const scrapes = 3
	took := make(chan time.Duration, scrapes)
	for range scrapes {
		go func() {
			began := time.Now()
			reg.Gather()
			took <- time.Since(began)
		}()
	}
	longest := time.Duration(0)
	for range scrapes {
		longest = max(longest, <-took)
	}
	if longest > 3*time.Second { // the read's timeout is 2 s
		t.Fatalf("%d concurrent scrapes: the longest took %v; want each bounded by the read's 2 s timeout", scrapes, longest)
	}
}
