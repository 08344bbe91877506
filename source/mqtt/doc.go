// Package mqtt consumes MQTT 5 deliveries into replayguard's engine with
// Eclipse paho.golang: a persistent session under a fixed client id, QoS 1
// (or 2) subscriptions, deliveries batched by count and linger, each batch
// decided and durably committed by a Processor, then acknowledged in receive
// order. Nothing is acknowledged before its commit, and every delivery is
// acknowledged after it, whatever its outcome, or the broker would stall
// behind it.
//
//	c, err := mqtt.New(mqtt.Config{
//		Brokers:  []string{"tcp://primary:1883", "tcp://standby:1883"},
//		ClientID: "replayguard-1",
//		Filters:  []mqtt.Filter{{Topic: "incidents/#", QoS: 1}},
//		Logger:   logger,
//	}, eng)
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx is done; commits and acknowledges what is in hand
//
// # Acknowledgements and reconnects
//
// The session state that writes acknowledgements is shared by paho's
// successive connections and writes to the current one. A packet id only
// names a message within one broker's session: on a resumed session
// Mosquitto resends the unacknowledged messages under their old ids with
// DUP=1, but a standby restored from an older snapshot may hold other
// messages under the same ids, and acknowledging one of those before its
// commit would lose it. So the consumer takes the acknowledgements over
// from paho: each connection has a generation, noted on its deliveries, and
// a committed batch's PUBACKs go out in one write only while the
// generation that received them is still up, under the lock that a
// connection change takes.
// Deliveries of a dropped connection are still decided and committed (they
// are in hand) but never acknowledged; the broker's resend is found
// duplicate by the engine.
//
// After a connection that delivered (or answered a keepalive ping) and held
// for ConnectRetryMin, a drop is a failover: the consumer tries every
// broker of the list at once, and waits, jittered and growing, only between
// rounds that all fail. A connection that proved nothing, shorter or
// silent, is a flap and backs off, so that a broker kicking the client or
// two consumers with one client id cannot make a reconnect storm. Each
// attempt ("mqtt connecting": broker, attempt, wait) and each wait, as it
// starts, is logged at Info.
//
// A Process error acknowledges nothing: the same batch is passed again after
// a capped, jittered, growing delay, Ready reports false meanwhile, and the
// broker, allowed ReceiveMaximum unacknowledged deliveries, stops sending:
// a slow or failing store is backpressure, not memory growth. (Mosquitto
// 2.0.11 configured with max_queued_messages 0 was seen sending thousands
// past a Receive Maximum of 1000; those deliveries wait in the consumer.)
//
// A Processor that also has Submit, as the engine does (engine.Engine.Submit),
// has the next batch collected and decided while the last one commits;
// acknowledgements stay in receive order, each after its batch's commit. A batch
// whose commit failed is passed to Process again, and so is one decided
// on top of it.
//
// A Processor that also has Prepare([]engine.Message), as the engine does,
// has each message decoded in paho's receive callback, off the goroutine
// that decides and commits.
//
// # Events
//
// Config.Observer hears the events every source of replayguard reports
// (package source, so that one Observer, the metrics, serves them all).
// This consumer reports Connected, Disconnected, ConnectFailed (one attempt
// to one broker), Stalled (no PINGRESP within the keepalive),
// SubscribeRefused (a SUBACK that did not grant every filter as asked),
// Received, Committed, CommitFailed, Acked, AckDropped and Abandoned, each
// with the Event fields source documents. A drop before an acknowledgement
// (AckDropped) leaves packet ids that mean nothing to a new connection.
// The connections to the brokers it dials itself (TCP, TLS) are
// internal/mqttconn's, shared with the other MQTT consumer and the MQTT
// output.
//
// Run must not be called again before it returns; Ready may be called from
// any goroutine. The Observer is called from the consumer's and paho's
// goroutines, possibly concurrently.
package mqtt
