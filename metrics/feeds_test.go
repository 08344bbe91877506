package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source"
)

// Each feed counts its deliveries, connection, firsts and duplicates under
// its name; the common series sum the feeds, and the broker counts as
// connected while any feed is.
func TestFeeds(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "1.2.3", "deadbeef", "incidents")
	a, b := m.Feed("a"), m.Feed("b")
	a.Observe(source.Event{Kind: source.Connected})
	b.Observe(source.Event{Kind: source.Connected})
	a.Observe(source.Event{Kind: source.Received, N: 3})
	b.Observe(source.Event{Kind: source.Received, N: 2})
	a.Observe(source.Event{Kind: source.Disconnected})
	a.Observe(source.Event{Kind: source.Connected})    // a reconnect
	a.Observe(source.Event{Kind: source.Disconnected}) // path a is down; b carries on
	recs := records("incidents", "applied", "applied", "applied_late", "duplicate", "duplicate")
	for i, feed := range []string{"a", "a", "b", "b", "a"} {
		recs[i].Feed = feed
	}
	m.Committed(recs, nil)
	m.Committed([]engine.AuditRecord{{Route: "incidents", Outcome: "discarded", Ref: 1}}, nil)

	want := `
# HELP replayguard_broker_connected 1 while the broker connection is up, else 0.
# TYPE replayguard_broker_connected gauge
replayguard_broker_connected 1
# HELP replayguard_feed_connected 1 while the feed's broker connection is up, else 0.
# TYPE replayguard_feed_connected gauge
replayguard_feed_connected{feed="a"} 0
replayguard_feed_connected{feed="b"} 1
# HELP replayguard_feed_deliveries_total Deliveries received from each redundant broker path (mqtt.feeds); they sum to replayguard_received_total.
# TYPE replayguard_feed_deliveries_total counter
replayguard_feed_deliveries_total{feed="a"} 3
replayguard_feed_deliveries_total{feed="b"} 2
# HELP replayguard_feed_first_total Messages the feed delivered first (applied or applied late): the feed that won them.
# TYPE replayguard_feed_first_total counter
replayguard_feed_first_total{feed="a"} 2
replayguard_feed_first_total{feed="b"} 1
# HELP replayguard_feed_duplicates_total Deliveries of the feed decided duplicate: mostly the twin of a message the other feed delivered first.
# TYPE replayguard_feed_duplicates_total counter
replayguard_feed_duplicates_total{feed="a"} 1
replayguard_feed_duplicates_total{feed="b"} 1
# HELP replayguard_received_total Deliveries taken from the source.
# TYPE replayguard_received_total counter
replayguard_received_total 5
# HELP replayguard_reconnects_total Broker connections established after the first one.
# TYPE replayguard_reconnects_total counter
replayguard_reconnects_total 1
`
	names := []string{"replayguard_broker_connected", "replayguard_feed_connected", "replayguard_feed_deliveries_total",
		"replayguard_feed_first_total", "replayguard_feed_duplicates_total", "replayguard_received_total", "replayguard_reconnects_total"}
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	b.Observe(source.Event{Kind: source.Disconnected})
	down := `
# HELP replayguard_broker_connected 1 while the broker connection is up, else 0.
# TYPE replayguard_broker_connected gauge
replayguard_broker_connected 0
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(down), "replayguard_broker_connected"); err != nil {
		t.Fatalf("both feeds down: %v", err)
	}
}
