// Package mqtt3 consumes MQTT 3.1.1 deliveries into replayguard's engine
// with Eclipse paho.mqtt.golang: a persistent session (CleanSession 0)
// under a fixed client id, QoS 1 (or 2) subscriptions, optionally shared
// ($share/GROUP/filter), deliveries batched by count and linger, each batch
// decided and durably committed by a Processor, then acknowledged in
// receive order. Nothing is acknowledged before its commit, and every
// delivery is acknowledged after it, whatever its outcome, or the broker
// would stall behind it. It is the sibling of source/mqtt (MQTT 5) for
// brokers and gateways that speak only 3.1.1, such as NATS 2.9's MQTT
// listener.
//
//	c, err := mqtt3.New(mqtt3.Config{
//		Brokers:  []string{"tcp://primary:1883", "tcp://standby:1883"},
//		ClientID: "replayguard-1",
//		Filters:  []mqtt3.Filter{{Topic: "incidents/#", QoS: 1}},
//		Logger:   logger,
//	}, eng)
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx is done; commits and acknowledges what is in hand
//
// # Acknowledgements and reconnects
//
// paho's automatic acknowledgement is off (SetAutoAckDisabled): the
// consumer calls each delivery's Message.Ack after its batch's commit, in
// receive order. A packet id only names a message within one connection's
// session: a standby restored from an older snapshot may hold other
// messages under the same ids, and acknowledging one of those before its
// commit would lose it. So every connection is its own paho client, with
// a generation noted on its deliveries, and a delivery is acknowledged only
// while its connection is the current one. paho.mqtt.golang v1.5 binds
// Message.Ack to the router of the connection that delivered the message
// and drops it once that connection is gone, so an old delivery's Ack
// cannot reach a new connection in any case; the generation check also
// keeps the Acked and AckDropped counts true. Deliveries of a dropped
// connection are still decided and committed (they are in hand) but never
// acknowledged; the broker's resend, DUP set, is found duplicate by the
// engine. The DUP flag is recorded on the message, never trusted.
//
// After a connection that delivered and held for ConnectRetryMin (or held
// a minute), a drop is a failover: the consumer tries every broker of the
// list at once, and waits, jittered and growing, only between rounds that
// all fail and after connections that proved nothing (flaps). A PINGRESP
// missing for a keepalive period is a stall: paho drops the connection and
// the consumer reconnects.
//
// MQTT 3.1.1 has no receive maximum: the broker's in-flight limit
// (Mosquitto's max_inflight_messages, 20 unless configured; NATS's
// mqtt.max_ack_pending) bounds the deliveries in hand, and with it the
// largest batch: raise it for throughput.
//
// A Process error acknowledges nothing: the same batch is passed again after
// a capped, jittered, growing delay, and Ready reports false meanwhile.
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
// (package source). This consumer reports the MQTT 5 consumer's
// (source/mqtt), meaning the same: Connected, Disconnected, ConnectFailed
// (one attempt to one broker, or the discarding of the session that
// CleanStart asks for), Stalled, SubscribeRefused, Received, Committed,
// CommitFailed, Acked, AckDropped and Abandoned. The connections to the
// brokers it dials itself (TCP, TLS) are internal/mqttconn's; this
// consumer adds a bound on each write, and gathers the PUBACKs of a batch
// into one write.
//
// Run must not be called again before it returns; Ready may be called from
// any goroutine. The Observer is called from the consumer's and paho's
// goroutines, possibly concurrently.
package mqtt3
