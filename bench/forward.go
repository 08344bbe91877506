package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/replayguard/replayguard/internal/benchfeed"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// cleanTopics is where the forward row's copies go, on the same broker.
const cleanTopics = "clean/"

// mqttForward measures `replayguard run` (embedded store) on a live feed
// with a forward effect that publishes each applied message's copy to
// clean/<topic> on the same Mosquitto (outputs.mqtt defaults to the
// consumer's broker), where a downstream paho consumer takes them. The
// timer runs until every delivery is decided and every distinct update's
// copy has reached the downstream.
func mqttForward(h *harness, feed []benchfeed.Message) result {
	broker := testbroker.StartMosquitto(h, testbroker.MosquittoOptions{})
	defer broker.Kill()
	down := testbroker.StartAutoAckConsumer(h, broker.URL(), testbroker.UniqueClientID("rg-peers-down"), cleanTopics+"#")
	defer down.Close()
	routes := fmt.Sprintf(benchfeed.Route, filepath.Join(h.TempDir(), "data")) +
		fmt.Sprintf("      - forward: {topic: %q}\n", cleanTopics+"{topic}")
	d := newDaemonConfig(h, routes, fmt.Sprintf("{brokers: [%q], client_id: %q, session_expiry: 1h}",
		broker.URL(), testbroker.UniqueClientID("rg-peers")))
	d.start(h)
	d.waitReady(h)
	pub := feedPublisher(h, broker.URL(), feed)
	defer pub.Close()
	unique := int64(benchfeed.Unique(feed))
	position := testbroker.Throttle(20*time.Millisecond, func() int64 { return d.position(h) })
	done := func() int64 { // every delivery decided, and every copy downstream
		p := position()
		if down.Received() < unique {
			p = min(p, int64(len(feed))-1)
		}
		return p
	}
	rate := testbroker.MeasureLive(h, pub, len(feed), done)
	applied := d.applied(h)
	d.stop(h)
	// The wait above ends only once every copy is downstream.
	return result{rate: rate.PerSecond(), check: countCheck(len(feed), int(unique), applied)}
}
