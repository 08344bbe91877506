package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
)

// Unrouted is the route label of a message no route matched: it is
// malformed before any route is known.
const Unrouted = "unrouted"

// Windows is what the metrics read from the engine at scrape time.
// *engine.Engine satisfies it. Both methods must be safe for concurrent use.
// CountGaps counts the source windows and their open gaps, reading a
// shared store's windows from the store: it must give up when ctx is
// done, so that a store that does not answer holds up no scrape.
type Windows interface {
	Stats() engine.Stats
	CountGaps(ctx context.Context) (sources int, gaps int64, err error)
}

// Metrics holds replayguard's metrics. It implements engine.Observer,
// source.Observer and prometheus.Collector.
type Metrics struct {
	acct *accounting // received, decisions, in flight: one lock, one scrape

	acked         prometheus.Counter
	ackLag        prometheus.Histogram
	gapsOpened    prometheus.Counter
	batchSize     prometheus.Histogram
	commitTime    prometheus.Histogram
	connected     prometheus.Gauge
	reconnects    prometheus.Counter
	storeErrors   prometheus.Counter
	ackDropped    prometheus.Counter
	connectErrors prometheus.Counter
	stalls        prometheus.Counter
	subRefusals   prometheus.Counter

	feeds      *feeds
	collectors []prometheus.Collector
	reg        prometheus.Registerer // for what is registered after New (WatchReady)

	mu    sync.Mutex
	wasUp bool // a connection came up before: the next one is a reconnect
}

// New registers replayguard's metrics on reg and returns them. routes are
// the configured route names: every route × outcome series starts at 0, so
// a rate over an outcome that has not happened yet is 0, not absent.
// New panics if a metric is already registered on reg.
func New(reg prometheus.Registerer, version, commit string, routes ...string) *Metrics {
	m := &Metrics{
		acct: newAccounting(routes),
		reg:  reg,
		acked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replayguard_acked_total",
			Help: "Deliveries acknowledged to the broker after their decision was committed.",
		}),
		ackLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "replayguard_ack_lag_seconds",
			Help:    "Time from receiving a delivery to acknowledging it.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		gapsOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replayguard_gaps_total",
			Help: "Gap ranges opened: a sequenced source skipped one or more sequences.",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "replayguard_batch_size",
			Help:    "Deliveries decided and committed per group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "replayguard_commit_duration_seconds",
			Help:    "Time to decide and durably commit one batch.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "replayguard_broker_connected",
			Help: "1 while the broker connection is up, else 0.",
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replayguard_reconnects_total",
			Help: "Broker connections established after the first one.",
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replayguard_store_errors_total",
			Help: "Commits the store failed; the batch was not acknowledged and is retried or redelivered.",
		}),
		ackDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replayguard_ack_dropped_total",
			Help: "Committed deliveries left unacknowledged (their connection dropped, or a stop could not commit those received before them); the broker resends them and they are found duplicate.",
		}),
		connectErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replayguard_connect_errors_total",
			Help: "Failed attempts to connect to a broker.",
		}),
		stalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replayguard_stalls_total",
			Help: "Connections dropped because the broker stopped answering keepalives.",
		}),
		subRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replayguard_subscribe_refusals_total",
			Help: "SUBACKs that refused a subscription, granted one at QoS 0 or left one unanswered; after run's first grant, run is not ready and subscribes again.",
		}),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "replayguard_build_info",
		Help:        "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit},
	})
	info.Set(1)
	m.feeds = newFeeds()
	m.collectors = append([]prometheus.Collector{m.acct, m.acked, m.ackLag, m.gapsOpened, m.batchSize,
		m.commitTime, m.connected, m.reconnects, m.storeErrors, m.ackDropped, m.connectErrors, m.stalls, m.subRefusals, info}, m.feeds.collectors()...)
	reg.MustRegister(m)
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors {
		c.Collect(ch)
	}
}

// Watch makes the scrape-time gauges (key window entries, sources, entities,
// open gaps, audit position) read w. Until it is called they are absent.
func (m *Metrics) Watch(w Windows) { m.acct.setWindows(w) }

// Close stops what a scrape left running: the count of a shared store's
// source windows that outlived the scrape that started it (the store did
// not answer within 0.5 s) is cancelled and waited for. Scrapes after
// Close count no windows of a shared store: they show the last count,
// stale. Call it once scrapes have stopped (the HTTP server shut down) and
// before the store closes, so that no read of the store outlives the
// process's shutdown.
func (m *Metrics) Close() { m.acct.gaps.close() }

// WatchQuarantine makes replayguard_quarantine_open count q's open entries
// at scrape time. Until it is called the gauge is absent.
func (m *Metrics) WatchQuarantine(q Quarantine) { m.acct.setQuarantine(q) }

// Committed counts the decisions of a durable commit, and the gap ranges
// they opened (their audit records' Gap) in replayguard_gaps_total. It
// implements engine.Observer: it takes one short lock and never blocks.
func (m *Metrics) Committed(records []engine.AuditRecord, _ []engine.EntityState) {
	n, gaps := m.acct.committed(records)
	if n > 0 {
		m.batchSize.Observe(float64(n))
	}
	if gaps > 0 {
		m.gapsOpened.Add(float64(gaps))
	}
	m.countFeeds(records)
}

// Received counts n deliveries taken from a source, before they are
// decided. A source calls it once per delivery, never again for a retry of
// the same batch. The broker sources report them through Observe instead.
func (m *Metrics) Received(n int) { m.acct.received(n) }

// Observe records what a broker source did. It implements source.Observer
// and never blocks.
func (m *Metrics) Observe(e source.Event) {
	switch e.Kind {
	case source.Connected:
		m.connectionUp()
	case source.Disconnected:
		m.connected.Set(0)
	case source.ConnectFailed:
		m.connectErrors.Inc()
	case source.Stalled:
		m.stalls.Inc()
	case source.SubscribeRefused:
		m.subRefusals.Inc()
	case source.Received:
		m.acct.received(e.N)
	case source.Committed:
		m.commitTime.Observe(e.Duration.Seconds())
	case source.CommitFailed:
		m.commitTime.Observe(e.Duration.Seconds())
		m.storeErrors.Inc()
	case source.Acked:
		m.acked.Add(float64(e.N))
		lag := e.Lag.Seconds()
		for range e.N {
			m.ackLag.Observe(lag)
		}
	case source.AckDropped:
		m.ackDropped.Add(float64(e.N))
	case source.Abandoned:
		m.acct.abandoned(e.N)
	}
}

// connectionUp records an established broker connection; every one after
// the first counts as a reconnect.
func (m *Metrics) connectionUp() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.wasUp {
		m.reconnects.Inc()
	}
	m.wasUp = true
	m.connected.Set(1)
}
