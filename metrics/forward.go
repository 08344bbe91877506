package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outbox is what the outbox gauges read at scrape time: the pending
// entries of this member's outbox and the bound the consumer is held to.
// *forward.Drainer satisfies it; Depth must be safe for concurrent use.
type Outbox interface {
	Depth() (depth, maxEntries int)
}

// Results of replayguard_forwarded_total.
const (
	ForwardDelivered = "delivered"
	ForwardHeld      = "held"
	ForwardFailed    = "failed"
)

var (
	descOutboxEntries = prometheus.NewDesc("replayguard_outbox_entries",
		"Pending forward entries in this member's outbox: committed, not yet acknowledged downstream.", nil, nil)
	descOutboxMax = prometheus.NewDesc("replayguard_outbox_max_entries",
		"outbox.max_entries: at this depth the consumer stops committing, and so acknowledging upstream.", nil, nil)
)

// Forward holds the metrics of the forward effect's drainer, labelled by
// output kind only (mqtt, webhook, nats), never by key or topic. It
// implements forward.Observer and prometheus.Collector; its methods never
// block and are safe for concurrent use.
type Forward struct {
	forwarded *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	retries   *prometheus.CounterVec

	mu     sync.Mutex
	outbox Outbox
}

// NewForward registers the forward metrics on reg. outputs are the output
// kinds in use: their series start at 0. It panics if a metric is already
// registered on reg.
func NewForward(reg prometheus.Registerer, outputs ...string) *Forward {
	f := &Forward{
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replayguard_forwarded_total",
			Help: "Outbox entries by output and result: delivered (acknowledged downstream; a copy sent again after a crash counts again), held (refused for good, or held by an operator while pending; audited as forward_held), failed (an attempt that failed, counted at the entry it stopped at; sent again).",
		}, []string{"output", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "replayguard_forward_latency_seconds",
			Help:    "Time from an entry's decision, committed with it, to its downstream acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 20),
		}, []string{"output"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replayguard_forward_retries_total",
			Help: "Attempts of an output made again after a failed one, each after a backoff.",
		}, []string{"output"}),
	}
	for _, out := range outputs {
		for _, r := range []string{ForwardDelivered, ForwardHeld, ForwardFailed} {
			f.forwarded.WithLabelValues(out, r)
		}
		f.retries.WithLabelValues(out)
	}
	reg.MustRegister(f)
	return f
}

// WatchOutbox makes the outbox gauges read o at scrape time. Until it is
// called they are absent.
func (f *Forward) WatchOutbox(o Outbox) {
	f.mu.Lock()
	f.outbox = o
	f.mu.Unlock()
}

// Forwarded counts n entries of output with result.
func (f *Forward) Forwarded(output, result string, n int) {
	f.forwarded.WithLabelValues(output, result).Add(float64(n))
}

// ForwardLatency observes one entry's time from decision to acknowledgement.
func (f *Forward) ForwardLatency(output string, d time.Duration) {
	f.latency.WithLabelValues(output).Observe(d.Seconds())
}

// ForwardRetried counts one retry of output.
func (f *Forward) ForwardRetried(output string) { f.retries.WithLabelValues(output).Inc() }

// Describe implements prometheus.Collector.
func (f *Forward) Describe(ch chan<- *prometheus.Desc) {
	f.forwarded.Describe(ch)
	f.latency.Describe(ch)
	f.retries.Describe(ch)
	ch <- descOutboxEntries
	ch <- descOutboxMax
}

// Collect implements prometheus.Collector: the outbox gauges are read now.
func (f *Forward) Collect(ch chan<- prometheus.Metric) {
	f.forwarded.Collect(ch)
	f.latency.Collect(ch)
	f.retries.Collect(ch)
	f.mu.Lock()
	o := f.outbox
	f.mu.Unlock()
	if o != nil {
		depth, maxEntries := o.Depth()
		ch <- prometheus.MustNewConstMetric(descOutboxEntries, prometheus.GaugeValue, float64(depth))
		ch <- prometheus.MustNewConstMetric(descOutboxMax, prometheus.GaugeValue, float64(maxEntries))
	}
}
