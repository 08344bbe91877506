package mqtt3

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// Defaults of Config.
const (
	DefaultKeepAlive       = 30 * time.Second
	DefaultBatchSize       = consume.DefaultBatchSize
	DefaultBatchLinger     = consume.DefaultBatchLinger
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
// every other zero value means the default stated. MQTT 3.1.1 has no
// session expiry and no receive maximum: the broker's configuration bounds
// how long it keeps the session (Mosquitto: persistent_client_expiration)
// and how many deliveries it has in flight (Mosquitto:
// max_inflight_messages, 20 unless configured; NATS: mqtt.max_ack_pending).
type Config struct {
	// Brokers are tried in order on every (re)connection: primary,
	// standby… Required. Schemes: tcp, mqtt, ssl, tls, mqtts, ws, wss.
	Brokers []string
	// ClientID names the persistent session (CleanSession 0). Required: a
	// random or empty id would start a new session, and lose the old one's
	// messages, on every restart. Two consumers must never share one.
	ClientID string
	// CleanStart discards the broker's session once as Run starts: a
	// connection with CleanSession 1 that is closed at once, before the
	// persistent one. Default false.
	CleanStart bool
	// ShareGroup, when set, subscribes to $share/<ShareGroup>/<filter>, so
	// the members of a group split the messages (Mosquitto 2 has shared
	// subscriptions for 3.1.1 clients too). Default none.
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
	// consumer may leave the share group (see the MQTT 5 consumer's
	// Config.LeaveShare): when granted, Run unsubscribes the group's
	// filters and decides what the session still delivers until none has
	// come for a second while it held none unacknowledged, or
	// ShutdownTimeout. Default nil: the
	// subscription is kept.
	LeaveShare func(ctx context.Context) (bool, error)
	// JoinShare, with ShareGroup, records in the group's store that this
	// consumer holds the group's subscription (see the MQTT 5 consumer's
	// Config.JoinShare): Run calls it each time the broker grants the
	// group's filters. Default nil: nothing recorded.
	JoinShare func(ctx context.Context) error
	// QuitShare, with ShareGroup, records in the group's store that this
	// consumer may no longer hold the group's subscription (see the MQTT 5
	// consumer's Config.QuitShare): Run calls it when a connection on
	// which the broker granted the group's filters is lost. Default nil:
	// nothing recorded.
	QuitShare func(ctx context.Context) error
	// Hold, when set, is asked before each round of connections: while
	// it says why, no connection is made (see the MQTT 5 consumer's
	// Config.Hold). Default nil: never held.
	Hold func() string
	// Adopt makes Run adopt the session of ClientID, that of a member of
	// ShareGroup that is gone (see the MQTT 5 consumer's Config.Adopt):
	// it connects once, with CleanSession 0 whatever CleanStart says,
	// subscribes to nothing, unsubscribes the group's filters from the
	// session at once, so that the broker deals the gone member nothing
	// more, and decides what the session delivers until none has come for
	// a second while none is unacknowledged (at most ShutdownTimeout);
	// then it disconnects, the session kept with the subscriptions that
	// are not shared (MQTT 3.1.1 has no session expiry: the broker keeps
	// it by its own settings). It never connects again: Run returns nil
	// once the session went quiet, an error wrapping ErrNoSession when
	// the broker had none, and ErrAdoption when it ended before the
	// session went quiet (no broker answered, the connection was lost, or
	// Run was stopped). MQTT 3.1.1 has no DISCONNECT from the broker: a
	// connection taken by the member returning is a connection lost.
	// Requires ShareGroup. Default false.
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
	// re-established. Default 30s; whole seconds, at least 1s.
	KeepAlive time.Duration
	// BatchSize is the most deliveries passed to one Process call.
	// Default 256.
	BatchSize int
	// BatchLinger is how long a batch waits for more deliveries after its
	// first one before it is processed anyway. Default 1ms.
	BatchLinger time.Duration
	// ConnectRetryMin and ConnectRetryMax bound the jittered exponential
	// backoff between rounds of connection attempts; each round tries every
	// broker of Brokers in order. A connection that delivered and held for
	// ConnectRetryMin, or held for a minute, is followed by a round at
	// once (a failover); any other is a flap, and the wait grows. Defaults
	// 250ms and 30s.
	ConnectRetryMin, ConnectRetryMax time.Duration
	// ConnectTimeout bounds one connection attempt to one broker, CONNACK
	// included. Default 10s.
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
	consume.Default(&c.KeepAlive, DefaultKeepAlive)
	consume.Default(&c.BatchLinger, DefaultBatchLinger)
	consume.DefaultRetry(&c.ConnectRetryMin, &c.ConnectRetryMax, DefaultConnectRetryMin, DefaultConnectRetryMax)
	consume.Default(&c.ConnectTimeout, DefaultConnectTimeout)
	consume.DefaultRetry(&c.CommitRetryMin, &c.CommitRetryMax, DefaultCommitRetryMin, DefaultCommitRetryMax)
	consume.Default(&c.ShutdownTimeout, DefaultShutdownTimeout)
	consume.Default(&c.BatchSize, DefaultBatchSize)
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
	if c.KeepAlive < time.Second || c.KeepAlive > 65535*time.Second || c.KeepAlive%time.Second != 0 {
		return fmt.Errorf("%w: keepalive %v is not a whole number of seconds from 1s to 65535s", ErrConfig, c.KeepAlive)
	}
	if c.BatchSize < 1 {
		return fmt.Errorf("%w: batch size %d below 1", ErrConfig, c.BatchSize)
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

// subscriptions are the filters as subscribed, by topic (two routes may
// share one filter: the higher QoS wins), with the $share prefix in a
// share group unless the filter is Unshared.
func (c *Config) subscriptions() map[string]byte {
	subs := make(map[string]byte, len(c.Filters))
	for _, f := range c.Filters {
		topic := f.Topic
		if c.ShareGroup != "" && !f.Unshared {
			topic = "$share/" + c.ShareGroup + "/" + f.Topic
		}
		subs[topic] = max(subs[topic], f.QoS)
	}
	return subs
}
