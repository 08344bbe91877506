package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
)

// Quarantine lists held messages. The store satisfies it. It is scanned
// at every scrape to count the open entries, so it should be cheap for the
// small quarantine an operator keeps on top of.
type Quarantine interface {
	ScanQuarantine(ctx context.Context, fn func(engine.QuarantineEntry) error) error
}

// A scrape waits at most scrapeStoreWait for each count it reads from a
// shared store (the open gaps, the quarantine), then shows the last count
// read, marked stale: a store that does not answer must not take the
// scrape, and every other metric with it, past the scraper's timeout.
// The count of the source windows goes on without the scrape for up to
// sourcesReadTimeout, so that a large fleet's count can still finish and
// serve the next scrapes. A count of the windows is reused by the scrapes
// that come within gapsReuse times the time it took: a fleet of a million
// sources is not read in full at every scrape.
const (
	scrapeStoreWait    = 500 * time.Millisecond
	sourcesReadTimeout = 2 * time.Second
	gapsReuse          = 20
)

var (
	descReceived = prometheus.NewDesc("replayguard_received_total",
		"Deliveries taken from the source.", nil, nil)
	descDecisions = prometheus.NewDesc("replayguard_decisions_total",
		"Deliveries decided and durably committed, by route and outcome.", []string{"route", "outcome"}, nil)
	descAbandoned = prometheus.NewDesc("replayguard_abandoned_total",
		"Deliveries left undecided and unacknowledged because shutdown could not commit them in time; the broker resends them.", nil, nil)
	descInFlight = prometheus.NewDesc("replayguard_in_flight",
		"Deliveries received whose decision is not committed yet: received_total - (sum(decisions_total) - store_recovered_total) - abandoned_total.", nil, nil)
	descResolved = prometheus.NewDesc("replayguard_quarantine_resolved_total",
		"Held messages an operator released or discarded, by route and the outcome audited for it (applied, applied_late, duplicate, discarded).",
		[]string{"route", "outcome"}, nil)
	descKeys = prometheus.NewDesc("replayguard_key_window_entries",
		"Keys in the key window.", nil, nil)
	descMaxKeys = prometheus.NewDesc("replayguard_key_window_max_entries",
		"The key window's bound in keys (window.max_entries): once it holds that many, a key leaves it by count before its ttl.", nil, nil)
	descOldestKey = prometheus.NewDesc("replayguard_key_window_oldest_timestamp_seconds",
		"When the oldest key in the key window was applied: an id route's replay of a message applied before it is applied again.", nil, nil)
	descSources = prometheus.NewDesc("replayguard_sources",
		"Source windows (route, source) kept.", nil, nil)
	descEntities = prometheus.NewDesc("replayguard_entities",
		"Projected entities.", nil, nil)
	descGapsOpen = prometheus.NewDesc("replayguard_gaps_open",
		"Sequences missing in the kept epochs of every sequenced source.", nil, nil)
	descPosition = prometheus.NewDesc("replayguard_audit_position",
		"Position of the last committed audit record.", nil, nil)
	descQuarantine = prometheus.NewDesc("replayguard_quarantine_open",
		"Messages held in quarantine for an operator.", nil, nil)
	descStale = prometheus.NewDesc("replayguard_scrape_stale",
		"1 when the value this scrape shows for metric is the last one read, because the shared store did not answer within 0.5 s (or failed); 0 when it was read for this scrape.",
		[]string{"metric"}, nil)
)

type labelPair struct{ route, outcome string }

// accounting counts deliveries and decisions under one lock, so that one
// scrape always satisfies received = decisions + abandoned + in flight, and
// reads the engine-state gauges at scrape time.
type accounting struct {
	mu         sync.Mutex
	recv       uint64
	dropped    uint64 // abandoned deliveries
	decided    map[labelPair]uint64
	resolved   map[labelPair]uint64
	windows    Windows
	losses     lossCounter // the windows' engine on a shared store, nil otherwise
	quarantine Quarantine
	gaps       *gapCount
	held       quarantineCount
}

// gapCount is the last count of the source windows and their open gaps,
// and what it cost. It owns the goroutine that counts a shared store's
// windows: close cancels it and waits for it.
type gapCount struct {
	mu       sync.Mutex
	at       time.Time     // when it was counted; zero: never
	took     time.Duration // how long the count took
	sources  int
	gaps     int64
	failed   error         // the last count's error, nil once one succeeds
	counting chan struct{} // closed when the count under way ends; nil: none

	ctx    context.Context // the counts' parent: done once closed
	stop   context.CancelFunc
	closed bool           // no count starts any more
	counts sync.WaitGroup // the count goroutine under way
}

func newGapCount() *gapCount {
	g := &gapCount{}
	g.ctx, g.stop = context.WithCancel(context.Background())
	return g
}

// close cancels the count of a shared store's windows under way, if any,
// and waits for it; later reads start none and return the last count,
// stale.
func (g *gapCount) close() {
	g.mu.Lock()
	g.closed = true
	g.stop()
	g.mu.Unlock()
	g.counts.Wait()
}

// read counts w's windows and open gaps, or returns the last count while
// it is younger than gapsReuse times what it took. The windows of a shared
// store are counted by one goroutine at a time, which gives up after
// sourcesReadTimeout; a scrape waits for it at most scrapeStoreWait and
// otherwise returns the last count, stale. After close it counts no more.
// It fails only when no count ever succeeded.
func (g *gapCount) read(w Windows, shared bool) (sources int, gaps int64, stale bool, err error) {
	g.mu.Lock()
	if !g.at.IsZero() && time.Since(g.at) < gapsReuse*g.took {
		defer g.mu.Unlock()
		return g.sources, g.gaps, false, nil
	}
	if g.closed && shared {
		g.mu.Unlock()
		return g.last(true)
	}
	if g.counting == nil {
		done := make(chan struct{})
		g.counting = done
		if !shared { // in memory: nothing to wait for
			g.mu.Unlock()
			g.count(context.Background(), w, done)
			return g.last(false)
		}
		ctx, cancel := context.WithTimeout(g.ctx, sourcesReadTimeout)
		g.counts.Add(1)
		go func() {
			defer g.counts.Done()
			defer cancel()
			g.count(ctx, w, done)
		}()
	}
	done := g.counting
	g.mu.Unlock()
	timer := time.NewTimer(scrapeStoreWait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		stale = true
	}
	return g.last(stale)
}

// last returns the last count, stale if it is not this scrape's; it fails
// when no count ever succeeded.
func (g *gapCount) last(stale bool) (sources int, gaps int64, _ bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at.IsZero() {
		if g.failed == nil {
			g.failed = fmt.Errorf("the shared store did not answer within %v: %w", scrapeStoreWait, context.DeadlineExceeded)
		}
		return 0, 0, true, g.failed
	}
	return g.sources, g.gaps, stale || g.failed != nil, nil
}

// count counts w's windows, keeps the count when it succeeds, and closes
// done.
func (g *gapCount) count(ctx context.Context, w Windows, done chan struct{}) {
	began := time.Now()
	sources, gaps, err := w.CountGaps(ctx)
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failed = err
	if err == nil {
		g.at, g.took, g.sources, g.gaps = now, now.Sub(began), sources, gaps
	}
	g.counting = nil
	close(done)
}

// quarantineCount is the last count of the open quarantine entries.
type quarantineCount struct {
	mu   sync.Mutex
	read bool
	n    int
}

// lossCounter counts the deliveries an engine decided again after its
// shared store lost them (*engine.Engine).
type lossCounter interface{ LossStats() engine.LossStats }

func newAccounting(routes []string) *accounting {
	a := &accounting{decided: map[labelPair]uint64{}, resolved: map[labelPair]uint64{}, gaps: newGapCount()}
	for _, r := range routes {
		for _, o := range engine.Outcomes() {
			a.decided[labelPair{r, o.String()}] = 0
		}
	}
	a.decided[labelPair{Unrouted, engine.Malformed.String()}] = 0
	return a
}

func (a *accounting) setWindows(w Windows) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.windows = w
	a.losses, _ = w.(lossCounter)
}

func (a *accounting) setQuarantine(q Quarantine) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.quarantine = q
}

func (a *accounting) received(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recv += uint64(n)
}

func (a *accounting) abandoned(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropped += uint64(n)
}

// committed counts the records of one commit and returns how many were
// deliveries, and how many of those opened a gap (a sequenced source
// skipped sequences). A record with a Ref is an operator's release or
// discard.
func (a *accounting) committed(records []engine.AuditRecord) (n, gaps int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range records {
		r := &records[i]
		lp := labelPair{r.Route, r.Outcome}
		if lp.route == "" {
			lp.route = Unrouted
		}
		if r.Ref != 0 {
			a.resolved[lp]++
			continue
		}
		if r.Outcome == engine.OutcomeRecovered || r.Outcome == engine.OutcomeLossAccepted {
			continue // what the member did about a store that lost its commits: no delivery's decision
		}
		a.decided[lp]++
		n++
		if r.Gap != nil {
			gaps++
		}
	}
	return n, gaps
}

func (a *accounting) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReceived, descDecisions, descAbandoned, descInFlight, descResolved,
		descKeys, descMaxKeys, descOldestKey, descSources, descEntities, descGapsOpen, descPosition, descQuarantine, descStale} {
		ch <- d
	}
}

// Collect reads the counters under the lock, then the engine and the store
// without it: the engine calls Committed while holding its own lock.
func (a *accounting) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	recv, dropped, decided := a.recv, a.dropped, uint64(0)
	for lp, n := range a.decided {
		decided += n
		ch <- prometheus.MustNewConstMetric(descDecisions, prometheus.CounterValue, float64(n), lp.route, lp.outcome)
	}
	for lp, n := range a.resolved {
		ch <- prometheus.MustNewConstMetric(descResolved, prometheus.CounterValue, float64(n), lp.route, lp.outcome)
	}
	w, q, losses := a.windows, a.quarantine, a.losses
	a.mu.Unlock()
	// Deliveries decided again from the journal after a store lost them
	// were received by no source of this process (read after the
	// decisions: the engine counts a recovered batch before its decisions,
	// so in flight is never negative).
	if losses != nil {
		decided -= min(decided, losses.LossStats().Recovered)
	}

	ch <- prometheus.MustNewConstMetric(descReceived, prometheus.CounterValue, float64(recv))
	ch <- prometheus.MustNewConstMetric(descAbandoned, prometheus.CounterValue, float64(dropped))
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(int64(recv-decided-dropped)))
	if w != nil {
		collectWindows(ch, w, a.gaps)
	}
	if q != nil {
		collectQuarantine(ch, q, &a.held)
	}
}

func collectWindows(ch chan<- prometheus.Metric, w Windows, g *gapCount) {
	st := w.Stats()
	if !st.Shared { // else the group's windows are in the store
		ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(st.Keys))
		ch <- prometheus.MustNewConstMetric(descMaxKeys, prometheus.GaugeValue, float64(st.MaxKeys))
		if st.OldestKey != 0 {
			ch <- prometheus.MustNewConstMetric(descOldestKey, prometheus.GaugeValue, float64(st.OldestKey)/1e9)
		}
		ch <- prometheus.MustNewConstMetric(descEntities, prometheus.GaugeValue, float64(st.Entities))
		ch <- prometheus.MustNewConstMetric(descSources, prometheus.GaugeValue, float64(st.Sources))
	}
	ch <- prometheus.MustNewConstMetric(descPosition, prometheus.GaugeValue, float64(st.Position))
	sources, gaps, stale, err := g.read(w, st.Shared)
	if st.Shared {
		ch <- staleMetric("replayguard_gaps_open", stale)
	}
	if err != nil { // absent, not 0: an unread window may have gaps
		if st.Shared {
			ch <- prometheus.NewInvalidMetric(descSources, err)
		}
		ch <- prometheus.NewInvalidMetric(descGapsOpen, err)
		return
	}
	if st.Shared { // only the group's sources are read
		ch <- prometheus.MustNewConstMetric(descSources, prometheus.GaugeValue, float64(sources))
	}
	ch <- prometheus.MustNewConstMetric(descGapsOpen, prometheus.GaugeValue, float64(gaps))
}

// countQuarantine counts q's open entries, without reading them where
// the store can.
func countQuarantine(ctx context.Context, q Quarantine) (int, error) {
	if c, ok := q.(engine.QuarantineCounter); ok {
		return c.CountQuarantine(ctx)
	}
	n := 0
	err := q.ScanQuarantine(ctx, func(engine.QuarantineEntry) error { n++; return nil })
	return n, err
}

// collectQuarantine counts q's open entries within scrapeStoreWait, or
// shows the last count, stale.
func collectQuarantine(ch chan<- prometheus.Metric, q Quarantine, last *quarantineCount) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeStoreWait)
	defer cancel()
	n, err := countQuarantine(ctx, q)
	last.mu.Lock()
	defer last.mu.Unlock()
	if err == nil {
		last.read, last.n = true, n
	}
	ch <- staleMetric("replayguard_quarantine_open", err != nil)
	if !last.read {
		ch <- prometheus.NewInvalidMetric(descQuarantine, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(descQuarantine, prometheus.GaugeValue, float64(last.n))
}

// staleMetric says whether the value shown for metric is the last one
// read rather than this scrape's.
func staleMetric(metric string, stale bool) prometheus.Metric {
	v := 0.0
	if stale {
		v = 1
	}
	return prometheus.MustNewConstMetric(descStale, prometheus.GaugeValue, v, metric)
}
