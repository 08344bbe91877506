package jetstream

import "github.com/replayguard/replayguard/source/internal/consume"

// Observer is told what the consumer does, for metrics and health. Observe
// is called from the consumer's and nats.go's goroutines, possibly
// concurrently, and must not block. Every source of replayguard reports
// the same Event, so one Observer (the metrics) serves them all; here its
// Broker field names the NATS server.
//
// The events let an operator check the delivery accounting:
// Received = Committed + Abandoned + in hand, and Committed = Acked + AckDropped.
type Observer = consume.Observer

// ObserverFunc adapts a function to Observer.
type ObserverFunc = consume.ObserverFunc

// EventKind says what happened.
type EventKind = consume.EventKind

// Event is one thing the consumer did.
type Event = consume.Event

// The events the JetStream consumer reports, with the Event fields each
// one sets. nats.go reconnects after a Disconnected; an AckDropped message
// (connection closed) is delivered again after AckWait; Abandoned messages
// are negatively acknowledged, so the server delivers them again at once.
const (
	Connected     = consume.Connected     // the connection to the server is up (Broker)
	Disconnected  = consume.Disconnected  // the connection is down (Broker)
	ConnectFailed = consume.ConnectFailed // a (re)connect or a bind of the consumer failed (Broker, Err)
	Received      = consume.Received      // messages entered the consumer (N)
	Committed     = consume.Committed     // Process returned nil for a batch (N, Duration)
	CommitFailed  = consume.CommitFailed  // Process returned an error (N, Duration, Err)
	Acked         = consume.Acked         // committed messages were acknowledged (N, Lag)
	AckDropped    = consume.AckDropped    // committed messages whose ack could not be sent (N)
	Abandoned     = consume.Abandoned     // messages shutdown could not commit (N)
	Redelivered   = consume.Redelivered   // messages the server delivered more than once (N)
)
