package mqtt3

import "time"

// Observer is told what the consumer does, for metrics and health. Observe
// is called from the consumer's and paho's goroutines, possibly
// concurrently, and must not block.
//
// The events let an operator check the delivery accounting:
// Received = Committed + Abandoned + in hand, and Committed = Acked + AckDropped.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// EventKind says what happened.
type EventKind uint8

// The events, with the Event fields each one sets. They mean what the
// events of the MQTT 5 consumer (source/mqtt) of the same names mean.
const (
	// Connected: a connection is up (Broker).
	Connected EventKind = iota
	// Disconnected: the connection is down (Broker).
	Disconnected
	// ConnectFailed: one attempt to one broker failed (Broker, Err).
	ConnectFailed
	// Stalled: no PINGRESP within the keepalive (Broker, Err); the
	// connection is dropped and re-established.
	Stalled
	// Received: deliveries entered the consumer (N).
	Received
	// Committed: Process returned nil for a batch (N, Duration of the call).
	Committed
	// CommitFailed: Process returned an error (N, Duration, Err); nothing
	// was acknowledged and the batch will be passed again.
	CommitFailed
	// Acked: committed deliveries were acknowledged (N, Lag: from the
	// oldest one's receipt to its acknowledgement).
	Acked
	// AckDropped: committed deliveries whose connection dropped before
	// their acknowledgement (N). The broker sends them again and the
	// engine finds them duplicate.
	AckDropped
	// Abandoned: deliveries left undecided and unacknowledged (N) because
	// shutdown could not commit them in time. The broker sends them again.
	Abandoned
)

var eventNames = [...]string{"connected", "disconnected", "connect_failed", "stalled", "received",
	"committed", "commit_failed", "acked", "ack_dropped", "abandoned"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one thing the consumer did.
type Event struct {
	Kind     EventKind
	Broker   string // URL of the broker concerned, without credentials
	N        int    // deliveries concerned
	Duration time.Duration
	Lag      time.Duration
	Err      error
}
