package jetstream

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// Defaults of Config.
const (
	DefaultURL           = "nats://127.0.0.1:4222"
	DefaultMaxAckPending = 2048
	DefaultAckWait       = 30 * time.Second
	// DefaultBatchSize is larger than the MQTT consumers': a stream's
	// backlog drains in fewer commits and pulls.
	DefaultBatchSize       = 1024
	DefaultBatchLinger     = consume.DefaultBatchLinger
	DefaultBindRetryMin    = consume.DefaultRetryMin
	DefaultBindRetryMax    = consume.DefaultRetryMax
	DefaultCommitRetryMin  = consume.DefaultCommitRetryMin
	DefaultCommitRetryMax  = consume.DefaultCommitRetryMax
	DefaultShutdownTimeout = consume.DefaultShutdownTimeout
	// MinAckWait is the shortest AckWait accepted.
	MinAckWait = time.Second
	// DefaultStreamCheck is how often Run reads the stream's and the
	// consumer's state.
	DefaultStreamCheck = time.Minute
)

// Config configures a Consumer. Fields marked "required" have no default;
// every other zero value means the default stated.
type Config struct {
	// URL of the server; a comma-separated list for a cluster. Default
	// DefaultURL.
	URL string
	// Name names the connection on the server. Default
	// "replayguard <Consumer>".
	Name string
	// TLS, when set, secures the connection. Default nil: plain, or the
	// system roots for a tls:// URL.
	TLS *tls.Config
	// CredsFile is a NATS credentials file (user JWT and nkey seed).
	// Default "" (none).
	CredsFile string
	// Stream to consume. Required.
	Stream string
	// Consumer is the durable pull consumer's name: created with
	// DeliverAll, explicit acks and MaxAckPending when the stream has none
	// of that name and the Processor has decided nothing yet (else Run
	// returns ErrStream, saying how to create it), bound (and its AckWait
	// and MaxAckPending updated, where it starts kept) otherwise. Required,
	// and fixed.
	Consumer string
	// Subjects filter the stream's subjects. Default none: all of them.
	// More than one needs nats-server 2.10. Subjects wider than an
	// existing consumer's filter, adding one with a message stored at or
	// below the consumer's position (which the server keeps, and would
	// pass over), make Run return ErrStream.
	Subjects []string
	// Routes are the engine's routes, in its order. At the bind, each
	// subject of the stream the consumer takes is logged with the routes
	// that match it, and a warning names one that no route matches, or
	// that the routes match only in part: its messages are quarantined as
	// malformed (no route matches); another names a route that matches
	// none of them, which decides nothing. While Run consumes, a change
	// of the stream's own subjects is warned about, each subject added is
	// checked the same way, and a route the change leaves matching none
	// is named. Default none: no check.
	Routes []Route
	// StreamCheck is how often Run reads the stream's subjects, first
	// sequence and deleted sequences and the consumer's settings and
	// position (see Run); messages lost are told one reading after it
	// shows them. Default DefaultStreamCheck.
	StreamCheck time.Duration
	// MaxAckPending is how many delivered messages the server lets wait
	// for their ack: the in-flight bound and the backpressure of a slow
	// Process. Default DefaultMaxAckPending, or 2×BatchSize when larger:
	// a batch committing and the next one collected.
	MaxAckPending int
	// AckWait is how long the server waits for an ack before it delivers
	// the message again. Default 30s; at least MinAckWait.
	AckWait time.Duration
	// BatchSize is the most messages passed to one Process call. Default
	// DefaultBatchSize; at most MaxAckPending.
	BatchSize int
	// BatchLinger is how long a batch waits for more messages after its
	// first one. Default 1ms.
	BatchLinger time.Duration
	// BindRetryMin and BindRetryMax bound the jittered exponential backoff
	// between attempts to find the stream and bind the consumer while the
	// server cannot answer. Defaults 250ms and 30s.
	BindRetryMin, BindRetryMax time.Duration
	// CommitRetryMin and CommitRetryMax bound the jittered exponential
	// backoff between Process attempts on one batch after an error.
	// Defaults 100ms and 10s.
	CommitRetryMin, CommitRetryMax time.Duration
	// ShutdownTimeout bounds how long Run, once its context is done,
	// commits and acknowledges the messages in hand. Default 10s.
	ShutdownTimeout time.Duration
	// Alone says that the Processor's store admits no other member (the
	// embedded and memory stores): another client pulling from the
	// durable consumer is then a second process with a store of its own,
	// and each would decide only the part of the stream the server deals
	// it. The bind waits, not ready and warning, while the server holds
	// pull requests of another client. Default false: the members of a
	// group on a shared store pull from the same durable.
	Alone bool
	// Marks, a single-owner store's (engine.Capabilities.Marks), keeps
	// where the consumer stands in the stream: its ack floor and the
	// stream's end as last seen, at the bind, at each StreamCheck and at
	// the stop. The next bind tells from it what the stream lost while no
	// Run consumed it: the messages a purge removed past the ack floor
	// (the server moves the consumer past them), or those a stream
	// deleted took with it. Default nil: not told.
	Marks engine.StreamMarks
	// Logger receives the consumer's logs. Default nil: discard.
	Logger *slog.Logger
	// Observer is told about connections, messages, commits and acks.
	// Default nil: nobody.
	Observer source.Observer
}

func (c *Config) setDefaults() {
	consume.Default(&c.URL, DefaultURL)
	consume.Default(&c.Name, "replayguard "+c.Consumer)
	consume.Default(&c.BatchSize, DefaultBatchSize)
	consume.Default(&c.MaxAckPending, max(DefaultMaxAckPending, 2*c.BatchSize))
	consume.Default(&c.AckWait, DefaultAckWait)
	consume.Default(&c.BatchLinger, DefaultBatchLinger)
	consume.DefaultRetry(&c.BindRetryMin, &c.BindRetryMax, DefaultBindRetryMin, DefaultBindRetryMax)
	consume.DefaultRetry(&c.CommitRetryMin, &c.CommitRetryMax, DefaultCommitRetryMin, DefaultCommitRetryMax)
	consume.Default(&c.ShutdownTimeout, DefaultShutdownTimeout)
	consume.Default(&c.StreamCheck, DefaultStreamCheck)
	consume.DefaultSinks(&c.Logger, &c.Observer)
}

// Validate reports the first problem of a Config whose defaults are set.
func (c *Config) Validate() error {
	switch {
	case strings.TrimSpace(c.Stream) == "":
		return fmt.Errorf("%w: no stream", ErrConfig)
	case strings.TrimSpace(c.Consumer) == "":
		return fmt.Errorf("%w: empty consumer name: a durable consumer needs a fixed one", ErrConfig)
	case strings.ContainsAny(c.Stream+c.Consumer, " \t\r\n.*>"):
		return fmt.Errorf("%w: stream %q or consumer %q holds whitespace, '.', '*' or '>'", ErrConfig, c.Stream, c.Consumer)
	case c.BatchSize < 1 || c.BatchSize > c.MaxAckPending:
		return fmt.Errorf("%w: batch size %d outside 1..max ack pending (%d): a batch could never fill",
			ErrConfig, c.BatchSize, c.MaxAckPending)
	case c.AckWait < MinAckWait:
		return fmt.Errorf("%w: ack wait %v below %v", ErrConfig, c.AckWait, MinAckWait)
	case c.BindRetryMax < c.BindRetryMin || c.CommitRetryMax < c.CommitRetryMin:
		return fmt.Errorf("%w: a retry maximum is below its minimum", ErrConfig)
	}
	for _, r := range c.Routes {
		if r.Topic == "" {
			return fmt.Errorf("%w: route %q has no topic filter", ErrConfig, r.Name)
		}
	}
	for _, d := range []time.Duration{c.BatchLinger, c.BindRetryMin, c.CommitRetryMin, c.ShutdownTimeout, c.StreamCheck} {
		if d < 0 {
			return fmt.Errorf("%w: negative duration %v", ErrConfig, d)
		}
	}
	return nil
}
