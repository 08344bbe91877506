package metrics

import (
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descRetentionSuccess = prometheus.NewDesc("replayguard_audit_retention_last_success_timestamp_seconds",
		"When the last audit retention pass that failed on no chain ended; absent until one did.", nil, nil)
	descRetentionFailing = prometheus.NewDesc("replayguard_audit_retention_failing_chains",
		"Chains the last audit retention pass failed on; 0 before the first pass and after one that failed on none.", nil, nil)
	descRetentionHeld = prometheus.NewDesc("replayguard_audit_retention_held_records",
		"Records beyond audit.retention.max_records that the last audit retention pass kept in the store because the sink had yet to deliver them, summed over the chains the member trims; 0 when it held none.",
		[]string{"sink"}, nil)
)

// Retention holds the metrics of audit retention under run: the chains a
// pass failed on, when a pass last failed on none, and the records beyond
// the count limit each audit sink kept in the store. A single-owner
// store's log is one chain; on a shared store a pass goes over each chain
// the member claims. It implements prometheus.Collector; Pass never
// blocks and is safe for concurrent use.
type Retention struct {
	failures prometheus.Counter

	mu      sync.Mutex
	last    time.Time         // the end of the last pass that failed on no chain; zero: none yet
	failing int               // the chains the last pass failed on
	held    map[string]uint64 // by sink, as Held gave them
}

// NewRetention registers the audit retention metrics on reg; the failure
// counter starts at 0. It panics if they are already registered on reg.
func NewRetention(reg prometheus.Registerer) *Retention {
	r := &Retention{failures: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "replayguard_audit_retention_failures_total",
		Help: "Audit retention passes that failed, once per chain a pass failed on; the next pass tries again while the store keeps every record.",
	})}
	reg.MustRegister(r)
	return r
}

// Pass records one retention pass that ended at end and failed on failed
// chains; with none failed, end is the last successful pass.
func (r *Retention) Pass(end time.Time, failed int) {
	r.failures.Add(float64(failed))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = failed
	if failed == 0 {
		r.last = end
	}
}

// Held records the records beyond the count limit each audit sink kept
// in the store at the last pass, by sink name: a sink absent from held
// keeps the value it had.
func (r *Retention) Held(held map[string]uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = map[string]uint64{}
	}
	maps.Copy(r.held, held)
}

// Describe implements prometheus.Collector.
func (r *Retention) Describe(ch chan<- *prometheus.Desc) {
	r.failures.Describe(ch)
	ch <- descRetentionSuccess
	ch <- descRetentionFailing
	ch <- descRetentionHeld
}

// Collect implements prometheus.Collector.
func (r *Retention) Collect(ch chan<- prometheus.Metric) {
	r.failures.Collect(ch)
	r.mu.Lock()
	last, failing, held := r.last, r.failing, maps.Clone(r.held)
	r.mu.Unlock()
	for sink, n := range held {
		ch <- prometheus.MustNewConstMetric(descRetentionHeld, prometheus.GaugeValue, float64(n), sink)
	}
	ch <- prometheus.MustNewConstMetric(descRetentionFailing, prometheus.GaugeValue, float64(failing))
	if !last.IsZero() {
		ch <- prometheus.MustNewConstMetric(descRetentionSuccess, prometheus.GaugeValue, float64(last.UnixNano())/1e9)
	}
}
