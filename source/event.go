package source

import "time"

// Observer is told what a consumer does, for metrics and health. Observe
// is called from the consumer's goroutines and its client library's,
// possibly concurrently, and must not block. Every source of replayguard
// reports the same Event, so one Observer (the metrics) serves them all.
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

// EventKind says what happened. The kinds mean the same in every source,
// so that one set of metrics serves them all; a source reports only the
// kinds its protocol has, and its package doc says which.
type EventKind uint8

// The events, with the Event fields each one sets.
const (
	// Connected: a connection is up (Broker). Every one after the first of
	// a Run is a reconnect.
	Connected EventKind = iota
	// Disconnected: the connection is down (Broker); a reconnect follows
	// unless Run is returning.
	Disconnected
	// ConnectFailed: one attempt to connect (or, for JetStream, to bind
	// the consumer) failed (Broker, Err).
	ConnectFailed
	// Stalled: no PINGRESP within the keepalive (Broker, Err); the
	// connection is dropped and re-established. MQTT only.
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
	// AckDropped: committed deliveries whose acknowledgement could not be
	// sent because their connection dropped, or that a stop left behind
	// deliveries it could not commit (N). The broker sends them again and
	// the engine finds them duplicate.
	AckDropped
	// Abandoned: deliveries left undecided and unacknowledged (N) because
	// shutdown could not commit them in time. The broker sends them again.
	Abandoned
	// Redelivered: deliveries the server flagged as delivered before (N)
	// came in a batch; the engine decides them like any other, and the
	// audit record's dup field says so. JetStream only.
	Redelivered
	// Lost: messages of the stream the consumer never received and never
	// will (N): the stream removed them first (a purge, a limit), the
	// server moved the consumer past them, or the stream was deleted with
	// them. Never decided, so never in the accounting's received, but for
	// those a deleted stream took after the consumer received them, left
	// undecided by the stop (also Abandoned). JetStream only.
	Lost
	// SubscribeRefused: a SUBACK refused subscriptions, granted one at QoS
	// 0 or left one unanswered (Broker, N: the topic filters, Err naming
	// each, the routes that asked for it and the broker's answer). At a
	// Run's first subscription it ends Run; after that the consumer is not
	// ready and subscribes again. MQTT only.
	SubscribeRefused
)

var eventNames = [...]string{"connected", "disconnected", "connect_failed", "stalled", "received",
	"committed", "commit_failed", "acked", "ack_dropped", "abandoned", "redelivered", "lost", "subscribe_refused"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one thing a consumer did.
type Event struct {
	Kind     EventKind
	Broker   string // URL of the broker (or NATS server) concerned, without credentials
	N        int    // deliveries concerned
	Duration time.Duration
	Lag      time.Duration
	Err      error
}
