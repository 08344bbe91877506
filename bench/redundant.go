package main

import (
	"context"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/internal/benchfeed"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// mqttRedundant measures `replayguard run` (embedded store) draining the
// feed as a backlog from two paths (mqtt.feeds), each a Mosquitto of its
// own holding every message, as a producer that publishes to both leaves
// them. Its rate is of distinct deliveries: the feed's length over the time
// from the start until both paths' deliveries are decided, the second
// copy of each a duplicate.
func mqttRedundant(h *harness, feed []benchfeed.Message) result {
	a := testbroker.StartMosquitto(h, testbroker.MosquittoOptions{})
	defer a.Kill()
	b := testbroker.StartMosquitto(h, testbroker.MosquittoOptions{})
	defer b.Kill()
	d := newDaemonMQTT(h, fmt.Sprintf("{client_id: %q, session_expiry: 1h, feeds: [{name: a, brokers: [%q]}, {name: b, brokers: [%q]}]}",
		testbroker.UniqueClientID("rg-peers"), a.URL(), b.URL()))
	d.start(h) // both sessions and their subscriptions
	d.waitFeedsReady(h)
	d.stop(h)
	for _, broker := range []*testbroker.Mosquitto{a, b} {
		pub := feedPublisher(h, broker.URL(), feed)
		if got := pub.Publish(context.Background(), "bench", len(feed)); got != len(feed) {
			h.Fatalf("%s acknowledged %d of %d backlog messages", broker.URL(), got, len(feed))
		}
		pub.Close()
	}
	position := testbroker.Throttle(20*time.Millisecond, func() int64 { return d.position(h) })
	begin := time.Now()
	d.start(h)
	testbroker.WaitReceived(h, position, int64(2*len(feed)), 2*time.Minute)
	rate := testbroker.Rate{Messages: int64(len(feed)), Elapsed: time.Since(begin)}
	applied := d.applied(h)
	d.stop(h)
	return result{rate: rate.PerSecond(), check: countCheck(len(feed), benchfeed.Unique(feed), applied)}
}
