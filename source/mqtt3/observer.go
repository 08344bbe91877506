package mqtt3

import "github.com/replayguard/replayguard/source/internal/consume"

// Observer is told what the consumer does, for metrics and health. Observe
// is called from the consumer's and paho's goroutines, possibly
// concurrently, and must not block. Every source of replayguard reports
// the same Event, so one Observer (the metrics) serves them all.
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

// The events the MQTT 3.1.1 consumer reports, with the Event fields each one
// sets; they mean what the MQTT 5 consumer's (source/mqtt) do.
const (
	Connected     = consume.Connected     // a connection is up (Broker)
	Disconnected  = consume.Disconnected  // the connection is down (Broker)
	ConnectFailed = consume.ConnectFailed // one attempt to one broker failed (Broker, Err)
	Stalled       = consume.Stalled       // no PINGRESP within the keepalive (Broker, Err)
	Received      = consume.Received      // deliveries entered the consumer (N)
	Committed     = consume.Committed     // Process returned nil for a batch (N, Duration)
	CommitFailed  = consume.CommitFailed  // Process returned an error (N, Duration, Err)
	Acked         = consume.Acked         // committed deliveries were acknowledged (N, Lag)
	AckDropped    = consume.AckDropped    // committed deliveries whose connection dropped first (N)
	Abandoned     = consume.Abandoned     // deliveries shutdown could not commit (N)
)
