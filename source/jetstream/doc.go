// Package jetstream consumes a NATS JetStream stream into replayguard's
// engine through a durable pull consumer, created with nats.go's jetstream
// package on the stream at the first start (DeliverAll, explicit acks,
// MaxAckPending as the in-flight bound, never given up on), bound again at
// every later one, and pulled with requests of the package's own. Messages
// are batched by count and linger, each batch decided and durably
// committed by a Processor, then acknowledged in delivery order. Nothing is
// acknowledged before its commit, and every message is acknowledged after
// it, whatever its outcome.
//
// Every message of the stream is handed over, including one with no
// payload and a Status header, which any producer may publish and which
// nats.go's pull iterator (v1.55) takes for a status of the server's: a
// message is the server's only when it has no reply subject, as the
// stream's messages always have one.
//
//	c, err := jetstream.New(jetstream.Config{
//		URL:      "nats://127.0.0.1:4222",
//		Stream:   "PLANT",
//		Consumer: "replayguard",
//		Logger:   logger,
//	}, eng)
//	if err != nil {
//		return err
//	}
//	return c.Run(ctx) // until ctx is done; commits and acknowledges what is in hand
//
// # Subjects and topics
//
// The routes keep their MQTT topic filters: a subject is matched as the
// topic SubjectToTopic returns ('.' separators become '/'), so
// plant.m1.energy matches plant/+/energy with topic[1] = m1. A subject
// with no unambiguous topic is malformed, with the reason, and acknowledged.
// Cover tells how routes meet the subjects of a stream that a consumer
// takes, as the bind logs it; StreamSubjects reads those subjects from
// the server once, so that a configuration can be checked before a start.
//
// # Acknowledgements
//
// An ack is msg.Ack(): one publish on the connection, in order with the
// others, with no round trip. DoubleAck would wait for the server's
// confirmation of each, a round trip per message (or a window of them),
// and buy nothing here: an ack lost to a dropped connection or a server
// crash leaves the message to be delivered again after AckWait, and the
// engine finds the copy duplicate; a confirmed ack is no more durable
// either, as the server writes consumer state to disk asynchronously
// (after a SIGKILL, nats-server 2.9 was seen delivering hundreds of acked
// messages again, as first deliveries). At shutdown the connection is
// flushed, a round trip, so that a clean stop leaves nothing to redeliver.
//
// A Process error acknowledges nothing: the same batch is passed again
// after a capped, jittered, growing delay, Ready reports false meanwhile,
// and the server, allowed MaxAckPending unacknowledged messages, stops
// delivering: a slow or failing store is backpressure, not memory growth.
// Every message in hand, from its receipt to its ack (queued, decided,
// committing, in a commit retried or slow, committed behind a batch that
// must commit first), is marked in progress every quarter to half of
// AckWait, so that the server does not deliver it again meanwhile,
// however long the store takes.
//
// The delivery count is recorded like MQTT's DUP flag: a message the
// server delivered before (NumDelivered > 1) is logged (per batch), marked
// dup in its audit record, and decided like any other — never trusted.
//
// Reconnects and server restarts are nats.go's: it reconnects with a
// jittered, growing wait and buffers acks meanwhile; the consumer then
// pulls again. A consumer deleted on the server ends Run with
// ErrConsumerDeleted: when the server says so, or when, after a reconnect
// or a missed heartbeat, it no longer knows the consumer. The error names
// the stream sequence to create it from again (after the ack floor last
// read), or, when the stream went with it (deleted, or created again:
// its sequences start over), its first message: a Processor that has
// decided anything (engine.Engine.Stats) never has the consumer created
// anew, since a new one delivers the stream from its first message.
// Where the stream went, the messages of it the consumer had not decided
// (up to the stream's end as the server last showed it) are logged as an
// error and observed as Lost. With Config.Marks, a single-owner store's,
// the consumer keeps where it stands (its ack floor, the stream's end and
// creation time), and the next bind tells from it what a purge removed,
// or a stream deleted took, while no Run consumed.
//
// While Run consumes, it reads the stream and the consumer every
// Config.StreamCheck: a change of the stream's subjects is warned about
// (with the routes that take each added one, Config.Routes), messages the
// consumer never received and never will (the stream removed them first,
// a purge above all, which moves the consumer past them at once, or the
// server passed over them) are logged as an error with their stream
// sequences and observed as Lost, and a max_deliver set on the server is
// set back to unlimited. Until then, a message the server gives up on
// after max_deliver deliveries is taken from the stream by its sequence
// (the server's advisory names it) and decided like a delivery, dup set;
// a user the server does not allow to subscribe to that advisory is
// warned of at the start, and Warning says so while Run consumes. The sequences are exact for a consumer of the
// whole stream that received every delivery the server made; else only
// those the stream removed from its start are told, as an upper bound.
// Of what the server had delivered before the bind past the ack floor,
// the messages acknowledged one by one above it were decided; only the
// ack pending ones can be lost, and what the bind never receives of that
// span is told as at most their count (owed.go).
//
// A Processor that also has Submit, as the engine does (engine.Engine.Submit),
// has the next batch collected and decided while the last one commits;
// acknowledgements stay in delivery order, each after its batch's commit. A batch
// whose commit failed is passed to Process again, and so is one decided
// on top of it.
//
// A Processor that also has Prepare([]engine.Message), as the engine does,
// has each message decoded on the goroutine that pulls, off the one that
// decides and commits.
//
// # Events
//
// Config.Observer hears the events every source of replayguard reports
// (package source), its Broker field naming the NATS server: Connected,
// Disconnected, ConnectFailed (a (re)connect or a bind of the consumer),
// Received, Committed, CommitFailed, Acked, AckDropped, Abandoned, and,
// JetStream's own, Redelivered (messages the server delivered more than
// once) and Lost (messages it never received). nats.go reconnects after a Disconnected; an AckDropped message
// (connection closed) is delivered again after AckWait; Abandoned messages
// are negatively acknowledged once the server holds no pull request of the
// consumer's, so that it delivers them again at once, to the next consumer.
//
// Run must not be called again before it returns; Ready may be called from
// any goroutine. The Observer is called from the consumer's and nats.go's
// goroutines, possibly concurrently.
package jetstream
