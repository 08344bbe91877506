package main

import (
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/benchfeed"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// The MQTT 3.1.1 row: the live feed of the MQTT rows, on a fresh Mosquitto
// each (testbroker's configuration: 100 in flight per client, which under
// 3.1.1, without a receive maximum, bounds the deliveries in hand and so
// the largest batch), consumed over 3.1.1.

// mqtt311Noop measures Eclipse paho.mqtt.golang's auto-acking client doing
// nothing but count.
// Backlog: the session is created first, the feed queued while the
// consumer is away, and the timer includes its start.
func mqtt311Noop(h *harness, feed []benchfeed.Message, backlog bool) result {
	broker := testbroker.StartMosquitto(h, testbroker.MosquittoOptions{})
	defer broker.Kill()
	id := testbroker.UniqueClientID("rg-peers-noop3")
	pub := feedPublisher(h, broker.URL(), feed)
	defer pub.Close()
	var (
		c    *testbroker.AutoAckConsumer311
		rate testbroker.Rate
	)
	if backlog {
		testbroker.StartAutoAckConsumer311(h, broker.URL(), id, "incidents/#").Close() // the session and its subscription
		rate = testbroker.MeasureBacklog(h, pub, len(feed), func() func() int64 {
			c = testbroker.StartAutoAckConsumer311(h, broker.URL(), id, "incidents/#")
			return c.Received
		})
	} else {
		c = testbroker.StartAutoAckConsumer311(h, broker.URL(), id, "incidents/#")
		rate = testbroker.MeasureLive(h, pub, len(feed), c.Received)
	}
	c.Close()
	return result{rate: rate.PerSecond(), check: check{messages: len(feed), kept: int(c.Received())}}
}

// mqtt311Replayguard measures `replayguard run` (app.Run, in this process)
// with mqtt.protocol 3.1.1 on a durable embedded store, live or from a
// backlog as mqttReplayguard does.
func mqtt311Replayguard(h *harness, feed []benchfeed.Message, backlog bool) result {
	broker := testbroker.StartMosquitto(h, testbroker.MosquittoOptions{})
	defer broker.Kill()
	d := newDaemon(h, broker.URL(), config.ProtocolMQTT311)
	d.start(h)
	d.waitReady(h)
	pub := feedPublisher(h, broker.URL(), feed)
	defer pub.Close()
	position := testbroker.Throttle(20*time.Millisecond, func() int64 { return d.position(h) })
	var rate testbroker.Rate
	if backlog {
		d.stop(h)
		rate = testbroker.MeasureBacklog(h, pub, len(feed), func() func() int64 {
			d.start(h)
			return position
		})
	} else {
		rate = testbroker.MeasureLive(h, pub, len(feed), position)
	}
	applied := d.applied(h)
	d.stop(h)
	return result{rate: rate.PerSecond(), check: countCheck(len(feed), benchfeed.Unique(feed), applied)}
}
