package mqtt

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"time"

	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// Defaults of Config. BatchLinger was chosen by BenchmarkConsume against
// Mosquitto (see bench_test.go); BatchSize and ReceiveMaximum by draining a
// backlog with `replayguard run` (BENCHMARKS.md): each batch costs a commit,
// and a batch committing while the next is collected needs twice a batch in
// flight.
const (
	DefaultSessionExpiry   = time.Hour
	DefaultKeepAlive       = 30 * time.Second
	DefaultBatchSize       = 1024
	DefaultBatchLinger     = consume.DefaultBatchLinger
	DefaultReceiveMaximum  = 2048
	DefaultConnectRetryMin = consume.DefaultRetryMin
	DefaultConnectRetryMax = consume.DefaultRetryMax
	DefaultConnectTimeout  = 10 * time.Second
	DefaultCommitRetryMin  = consume.DefaultCommitRetryMin
	DefaultCommitRetryMax  = consume.DefaultCommitRetryMax
	DefaultShutdownTimeout = consume.DefaultShutdownTimeout
)

// Filter is one subscription.
type Filter = consume.Filter

// Config configures a Consumer. Fields marked "required" have no default;
// every other zero value means the default stated.
type Config struct {
	// Brokers are tried in order on every (re)connection: primary,
	// standby… Required. Schemes: tcp, mqtt, ssl, tls, mqtts, ws, wss.
	Brokers []string
	// ClientID names the persistent session. Required: a random or empty id
	// would start a new session, and lose the old one's messages, on every
	// restart. Two consumers must never share one.
	ClientID string
	// SessionExpiry is how long the broker keeps the session while the
	// consumer is away. Default 1h; at most 2^32-1 s.
	SessionExpiry time.Duration
	// CleanStart discards the broker's session on the first connection of
	// Run, with everything it held for this client. Default false.
	CleanStart bool
	// ShareGroup, when set, subscribes to $share/<ShareGroup>/<filter>, so
	// the members of a group split the messages. Default none.
	ShareGroup string
	// FormerShareGroups are share groups this client id subscribed in
	// before. On a resumed session the consumer, once subscribed, removes
	// the subscription forms the configuration no longer asks for: each
	// filter's $share/<group>/ form of these groups (but ShareGroup), and
	// its plain form when ShareGroup is set (a consumer that joined a
	// group), so that the session gets each message once. Default none.
	FormerShareGroups []string
	// FormerFilters are topic filters this client id subscribed to before
	// and no route asks for now (a route removed, or its topic changed):
	// on a resumed session they are removed too, in every form above, so
	// that their messages stop coming to a configuration that holds each
	// of them for want of a route. Default none.
	FormerFilters []string
	// LeaveShare, with ShareGroup, is asked as Run stops whether this
	// consumer may leave the share group (engine.ShareMembership's
	// LeaveShare: only while another live member holds it). When granted,
	// Run unsubscribes the group's filters, so that the broker deals this
	// member's share to the live members instead of keeping it in the
	// session, and decides what the session still delivers until none has
	// come for a second while it held none unacknowledged (the broker
	// sends no more than ReceiveMaximum before acknowledgements), or
	// ShutdownTimeout, before it stops as it would
	// without. Refused, or failing, the subscription is kept. Default nil:
	// the subscription is kept.
	LeaveShare func(ctx context.Context) (bool, error)
	// JoinShare, with ShareGroup, records in the group's store that this
	// consumer holds the group's subscription (engine.ShareMembership's
	// JoinShare); Run calls it each time the broker grants the group's
	// filters, never before: a member counted as holding a subscription it
	// does not hold yet would let the last one holding it leave, and the
	// broker would then drop the group's messages. Default nil: nothing
	// recorded, and the store grants no leave.
	JoinShare func(ctx context.Context) error
	// QuitShare, with ShareGroup, records in the group's store that this
	// consumer may no longer hold the group's subscription
	// (engine.ShareMembership's QuitShare); Run calls it when a connection
	// on which the broker granted the group's filters is lost: its session,
	// and the subscription with it, may be gone (expired at the broker, or
	// started clean), and a member counted as holding it would let the last
	// one holding it leave. JoinShare records it again at the next grant.
	// Default nil: nothing recorded.
	QuitShare func(ctx context.Context) error
	// Hold, when set, is asked before each connection: while it says why
	// (a member of a group whose lease has run out, its store out of
	// reach), no connection is made, and it is asked again every
	// HoldPoll. A member that cannot commit must not take its session
	// back from the live member that adopts it (engine.ShareAdopter):
	// it would hold the messages the broker deals it, unacknowledged,
	// and the adopter adopt it again, round after round. The connection
	// it has is not closed: the adopter's takes the session, and the
	// messages with it. Default nil: never held.
	Hold func() string
	// Adopt makes Run adopt the session of ClientID, that of a member of
	// ShareGroup that is gone (engine.ShareAdopter): it connects once,
	// with clean start false whatever CleanStart says, subscribes to
	// nothing, unsubscribes the group's filters from the session at once,
	// so that the broker deals the gone member nothing more, and decides
	// what the session delivers until none has come for a second while
	// none is unacknowledged (at most ShutdownTimeout); then it
	// disconnects, the session kept for SessionExpiry, with the
	// subscriptions that are not shared. It never connects again: Run
	// returns nil once the session went quiet, an error wrapping
	// ErrTakenOver when the broker gave the session to another connection
	// (the member returned), ErrNoSession when the broker had none, and
	// ErrAdoption when it ended before the session went quiet. Requires
	// ShareGroup. Default false.
	Adopt bool
	// Adopted names the member whose session Adopt adopts, for the logs.
	Adopted string
	// Filters to subscribe to. Required.
	Filters []Filter
	// Username and Password for the CONNECT packet. Default none. The
	// password is never logged.
	Username, Password string
	// TLS configures ssl://, tls://, mqtts:// and wss:// brokers. Default
	// nil: the system roots.
	TLS *tls.Config
	// KeepAlive is the MQTT keepalive. A PINGRESP missing for a keepalive
	// period after a PINGREQ is a stall: the connection is dropped and
	// re-established. Default 30s; rounded to whole seconds, at least 1s.
	KeepAlive time.Duration
	// BatchSize is the most deliveries passed to one Process call.
	// Default 1024; at most ReceiveMaximum.
	BatchSize int
	// BatchLinger is how long a batch waits for more deliveries after its
	// first one before it is processed anyway. Default 1ms.
	BatchLinger time.Duration
	// ReceiveMaximum is how many deliveries the broker may have in flight
	// (sent, not yet acknowledged) on the connection: the memory bound,
	// and the backpressure a slow Process exerts. Default 2048, or
	// 2×BatchSize when that is larger.
	ReceiveMaximum uint16
	// ConnectRetryMin and ConnectRetryMax bound the jittered exponential
	// backoff between rounds of connection attempts; each round tries every
	// broker of Brokers in order. A connection that delivered a message (or
	// answered a keepalive ping) and held for at least ConnectRetryMin, or
	// that held for a minute, is followed by a round at once: its drop is a
	// failover. Any other is a flap, and the wait before the next round
	// continues to grow where it was: one that dropped without traffic (a
	// broker kicking the client), one shorter than ConnectRetryMin (two
	// consumers with one client id taking the session from each other), one
	// the broker ended asking for a backoff (session taken over, busy,
	// quota, rate). Every failed round grows the wait. Defaults 250ms and
	// 30s.
	ConnectRetryMin, ConnectRetryMax time.Duration
	// ConnectTimeout bounds one connection attempt to one broker,
	// CONNACK included. Default 10s.
	ConnectTimeout time.Duration
	// CommitRetryMin and CommitRetryMax bound the jittered exponential
	// backoff between Process attempts on the same batch after an error.
	// Defaults 100ms and 10s.
	CommitRetryMin, CommitRetryMax time.Duration
	// ShutdownTimeout bounds how long Run, once its context is done, tries
	// to commit and acknowledge the deliveries in hand. Default 10s.
	ShutdownTimeout time.Duration
	// Logger receives the consumer's logs. Default nil: discard.
	Logger *slog.Logger
	// Observer is told about connections, deliveries, commits and acks.
	// Default nil: nobody.
	Observer source.Observer
}

func (c *Config) setDefaults() {
	consume.Default(&c.SessionExpiry, DefaultSessionExpiry)
	consume.Default(&c.KeepAlive, DefaultKeepAlive)
	consume.Default(&c.BatchLinger, DefaultBatchLinger)
	consume.DefaultRetry(&c.ConnectRetryMin, &c.ConnectRetryMax, DefaultConnectRetryMin, DefaultConnectRetryMax)
	consume.Default(&c.ConnectTimeout, DefaultConnectTimeout)
	consume.DefaultRetry(&c.CommitRetryMin, &c.CommitRetryMax, DefaultCommitRetryMin, DefaultCommitRetryMax)
	consume.Default(&c.ShutdownTimeout, DefaultShutdownTimeout)
	consume.Default(&c.BatchSize, DefaultBatchSize)
	consume.Default(&c.ReceiveMaximum, uint16(min(math.MaxUint16, max(DefaultReceiveMaximum, 2*c.BatchSize))))
	consume.DefaultSinks(&c.Logger, &c.Observer)
}

// Validate reports the first problem of a Config whose defaults are set.
func (c *Config) Validate() error {
	if err := consume.ValidSession(c.Brokers, c.ClientID, c.ShareGroup, c.Filters, ErrConfig); err != nil {
		return err
	}
	if err := consume.ValidFormerGroups(c.FormerShareGroups, ErrConfig); err != nil {
		return err
	}
	if err := consume.ValidFormerFilters(c.FormerFilters, ErrConfig); err != nil {
		return err
	}
	if c.Adopt && c.ShareGroup == "" {
		return fmt.Errorf("%w: a session is adopted for its share group: none set", ErrConfig)
	}
	if c.SessionExpiry < time.Second || c.SessionExpiry > math.MaxUint32*time.Second {
		return fmt.Errorf("%w: session expiry %v outside 1s..2^32-1s", ErrConfig, c.SessionExpiry)
	}
	if c.KeepAlive < 0 || c.KeepAlive > math.MaxUint16*time.Second {
		return fmt.Errorf("%w: keepalive %v outside 0..65535s", ErrConfig, c.KeepAlive)
	}
	if c.BatchSize < 1 || c.BatchSize > int(c.ReceiveMaximum) {
		return fmt.Errorf("%w: batch size %d outside 1..receive maximum (%d): a batch could never fill",
			ErrConfig, c.BatchSize, c.ReceiveMaximum)
	}
	for _, d := range []time.Duration{c.BatchLinger, c.ConnectRetryMin, c.ConnectTimeout, c.CommitRetryMin, c.ShutdownTimeout} {
		if d < 0 {
			return fmt.Errorf("%w: negative duration %v", ErrConfig, d)
		}
	}
	if c.ConnectRetryMax < c.ConnectRetryMin || c.CommitRetryMax < c.CommitRetryMin {
		return fmt.Errorf("%w: a retry maximum is below its minimum", ErrConfig)
	}
	return nil
}

func parseBroker(s string) (*url.URL, error) { return consume.ParseBroker(s, ErrConfig) }

// subscriptionTopic is the filter as subscribed: with the $share prefix
// when the consumer is in a share group and the filter is not Unshared.
func (c *Config) subscriptionTopic(f Filter) string {
	if c.ShareGroup == "" || f.Unshared {
		return f.Topic
	}
	return "$share/" + c.ShareGroup + "/" + f.Topic
}
