package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
)

// feeds are the per-feed series of redundant broker paths (mqtt.feeds).
type feeds struct {
	deliveries *prometheus.CounterVec
	connected  *prometheus.GaugeVec
	first      *prometheus.CounterVec
	duplicates *prometheus.CounterVec
	again      *prometheus.CounterVec
	behind     *prometheus.HistogramVec
	up, wasUp  map[string]bool // by feed, under Metrics.mu
}

func newFeeds() *feeds {
	return &feeds{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replayguard_feed_deliveries_total",
			Help: "Deliveries received from each redundant broker path (mqtt.feeds); they sum to replayguard_received_total.",
		}, []string{"feed"}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "replayguard_feed_connected",
			Help: "1 while the feed's broker connection is up, else 0.",
		}, []string{"feed"}),
		first: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replayguard_feed_first_total",
			Help: "Messages the feed delivered first (applied or applied late): the feed that won them.",
		}, []string{"feed"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replayguard_feed_duplicates_total",
			Help: "Deliveries of the feed decided duplicate: mostly the twin of a message the other feed delivered first.",
		}, []string{"feed"}),
		again: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replayguard_feed_applied_again_total",
			Help: "Twins the feed delivered that were applied although the other feed's copy was applied before: their key had left the key window.",
		}, []string{"feed"}),
		behind: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "replayguard_feed_behind_seconds",
			Help:    "How long after the other feed's copy each twin the feed delivered arrived: how far the feed trails.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"feed"}),
		up:    map[string]bool{},
		wasUp: map[string]bool{},
	}
}

func (f *feeds) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.deliveries, f.connected, f.first, f.duplicates, f.again, f.behind}
}

// Feed returns the source.Observer of one feed of mqtt.feeds: its
// deliveries and connection are counted under its name as well as in the
// common series, and replayguard_broker_connected is 1 while any feed is
// connected. Its series start at 0.
func (m *Metrics) Feed(name string) source.Observer {
	m.mu.Lock()
	m.feeds.up[name] = false
	m.mu.Unlock()
	m.feeds.deliveries.WithLabelValues(name)
	m.feeds.connected.WithLabelValues(name).Set(0)
	m.feeds.first.WithLabelValues(name)
	m.feeds.duplicates.WithLabelValues(name)
	m.feeds.again.WithLabelValues(name)
	m.feeds.behind.WithLabelValues(name)
	return source.ObserverFunc(func(e source.Event) { m.observeFeed(name, e) })
}

func (m *Metrics) observeFeed(name string, e source.Event) {
	switch e.Kind {
	case source.Connected, source.Disconnected:
		up := e.Kind == source.Connected
		m.feeds.connected.WithLabelValues(name).Set(boolValue(up))
		m.mu.Lock()
		if up && m.feeds.wasUp[name] { // a feed's first connection is no reconnect
			m.reconnects.Inc()
		}
		m.feeds.wasUp[name] = m.feeds.wasUp[name] || up
		m.feeds.up[name] = up
		any := false
		for _, u := range m.feeds.up {
			any = any || u
		}
		m.connected.Set(boolValue(any))
		m.mu.Unlock()
		return
	case source.Received:
		m.feeds.deliveries.WithLabelValues(name).Add(float64(e.N))
	}
	m.Observe(e)
}

// FeedBehind records that a twin of feed arrived d after the other feed's
// copy.
func (m *Metrics) FeedBehind(feed string, d time.Duration) {
	m.feeds.behind.WithLabelValues(feed).Observe(d.Seconds())
}

// FeedAppliedAgain counts a twin of feed applied although the other
// feed's copy was applied before.
func (m *Metrics) FeedAppliedAgain(feed string) {
	m.feeds.again.WithLabelValues(feed).Inc()
}

// countFeeds counts the committed decisions of each feed's deliveries.
func (m *Metrics) countFeeds(records []engine.AuditRecord) {
	for i := range records {
		r := &records[i]
		if r.Feed == "" {
			continue
		}
		switch r.Outcome {
		case "applied", "applied_late":
			m.feeds.first.WithLabelValues(r.Feed).Inc()
		case "duplicate":
			m.feeds.duplicates.WithLabelValues(r.Feed).Inc()
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
