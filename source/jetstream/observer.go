package jetstream

import "time"

// Observer is told what the consumer does, for metrics and health. Observe
// is called from the consumer's and nats.go's goroutines, possibly
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

// The events, with the Event fields each one sets. They mirror those of
// the MQTT source, so that one set of metrics serves both.
const (
	// Connected: the connection to the server is up (Server). Every one
	// after the first of a Run is a reconnect.
	Connected EventKind = iota
	// Disconnected: the connection is down (Server); nats.go reconnects.
	Disconnected
	// ConnectFailed: an attempt to (re)connect or to bind the consumer
	// failed (Server, Err).
	ConnectFailed
	// Received: messages entered the consumer (N).
	Received
	// Committed: Process returned nil for a batch (N, Duration of the call).
	Committed
	// CommitFailed: Process returned an error (N, Duration, Err); nothing
	// was acknowledged and the batch will be passed again.
	CommitFailed
	// Acked: committed messages were acknowledged (N, Lag: from the oldest
	// one's receipt to its ack).
	Acked
	// AckDropped: committed messages whose ack could not be sent (N): the
	// connection is closed. The server delivers them again after AckWait
	// and the engine finds them duplicate.
	AckDropped
	// Abandoned: messages left undecided and unacknowledged (N) because
	// shutdown could not commit them in time. They are negatively
	// acknowledged, so the server delivers them again at once.
	Abandoned
	// Redelivered: messages the server delivered more than once (N) came
	// in a batch; the engine decides them like any other, and the audit
	// record's dup field says so.
	Redelivered
)

var eventNames = [...]string{"connected", "disconnected", "connect_failed", "received",
	"committed", "commit_failed", "acked", "ack_dropped", "abandoned", "redelivered"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one thing the consumer did.
type Event struct {
	Kind     EventKind
	Server   string // URL of the server concerned, without credentials
	N        int    // messages concerned
	Duration time.Duration
	Lag      time.Duration
	Err      error
}
