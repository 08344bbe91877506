package config

import "time"

// Defaults applied by SetDefaults to fields left at their zero value.
const (
	DefaultStoreKind      = "embedded"
	DefaultStorePath      = "./replayguard-data"
	DefaultCachedRows     = 100_000 // engine.DefaultCachedRows
	DefaultJournalPath    = "./replayguard-journal"
	DefaultJournalRetain  = Duration(15 * time.Minute)
	DefaultCommitTimeout  = Duration(30 * time.Second)
	DefaultReadTimeout    = Duration(5 * time.Second)
	DefaultTTL            = Duration(2 * time.Hour)
	DefaultMaxEntries     = 1_000_000
	DefaultSequenceSpan   = 4096
	DefaultKeepEpochs     = 2
	MaxKeepEpochs         = 64 // engine.MaxKeepEpochs
	DefaultMaxPayload     = ByteSize(256 << 10)
	DefaultQoS            = 1
	DefaultBroker         = "tcp://127.0.0.1:1883"
	DefaultSessionExpiry  = Duration(time.Hour)
	DefaultAdoptLostAfter = Duration(45 * time.Second)
	DefaultKeepAlive      = Duration(30 * time.Second)
	DefaultBatchSize      = 1024 // measured: see BENCHMARKS.md
	DefaultBatchLinger    = Duration(time.Millisecond)
	DefaultReceiveMaximum = 2048
	DefaultMQTTProtocol   = ProtocolAuto
	DefaultHTTPListen     = "127.0.0.1:9780"

	// ListenOff as http.listen disables the HTTP server. An explicit empty
	// listen in the file means the same and is read as ListenOff.
	ListenOff = "off"
)

// MQTT protocol versions accepted in mqtt.protocol.
const (
	// ProtocolMQTT5 speaks MQTT 5 only.
	ProtocolMQTT5 = "5"
	// ProtocolMQTT311 speaks MQTT 3.1.1 only.
	ProtocolMQTT311 = "3.1.1"
	// ProtocolAuto tries MQTT 5 and falls back to 3.1.1 when the broker
	// refuses it.
	ProtocolAuto = "auto"
)

// Store kinds accepted in store.kind.
const (
	StoreMemory   = "memory"
	StoreEmbedded = "embedded"
	StoreRedis    = "redis"
	StorePostgres = "postgres"
)

// Config is the whole configuration file. Its zero value, after SetDefaults,
// is a valid configuration with no routes.
type Config struct {
	// Input is where run consumes from: mqtt (the mqtt section) or
	// jetstream (the jetstream section). Default mqtt.
	Input  string       `yaml:"input"`
	Store  StoreConfig  `yaml:"store"`
	Window WindowConfig `yaml:"window"`
	Limits LimitsConfig `yaml:"limits"`
	// Routes match messages by topic filter and say how to identify them.
	// No default; run needs at least one.
	Routes []Route    `yaml:"routes,omitempty"`
	MQTT   MQTTConfig `yaml:"mqtt"`
	// JetStream is the stream run consumes with input jetstream. Default:
	// absent with input mqtt; its defaults with input jetstream.
	JetStream *JetStreamConfig `yaml:"jetstream,omitempty"`
	HTTP      HTTPConfig       `yaml:"http"`
	// Audit is the audit log's retention and archive. Default: the store
	// keeps every record.
	Audit AuditConfig `yaml:"audit,omitempty"`
	// Outputs are the downstream connections of the forward effects.
	// Default: each output a route forwards to, with its defaults.
	Outputs OutputsConfig `yaml:"outputs,omitempty"`
	// Outbox bounds the forward entries waiting for their downstream.
	// Default max_entries 100000.
	Outbox OutboxConfig `yaml:"outbox"`

	// origin is where the file and the environment set each setting, for
	// the problems found after Load (Problem).
	origin origin
}

// StoreConfig selects where windows, effects, audit and quarantine live.
type StoreConfig struct {
	// Kind is memory, embedded, redis or postgres. Default embedded.
	Kind string `yaml:"kind"`
	// Path is the embedded store's directory. Default ./replayguard-data
	// when Kind is embedded; not used by other kinds.
	Path string `yaml:"path,omitempty"`
	// CachedRows bounds the sources and entities the engine keeps in
	// memory on the embedded store, which reads the others as batches
	// need them. Default 100000 (engine.DefaultCachedRows too); kind
	// embedded only.
	CachedRows int `yaml:"cached_rows,omitempty"`
	// URL locates the redis or postgres server. No default; required for
	// those kinds.
	URL string `yaml:"url,omitempty"`
	// Member is this process's member id in a consumer group on a shared
	// store (redis, postgres): it names the member's audit chain and the
	// lease that keeps a second process off it. Default mqtt.client_id for
	// run (jetstream.consumer with input jetstream); ingest and the other commands name one of their own.
	// As the default is the command's, Marshal (config print) leaves an
	// unset member out: the printed configuration given to ingest must not
	// make it take run's member id.
	Member string `yaml:"member,omitempty"`
	// Schema is the PostgreSQL schema holding the store's tables, created
	// at start. Default replayguard; kind postgres only.
	Schema string `yaml:"schema,omitempty"`
	// Prefix starts every Redis key of the store. It holds one hash tag
	// ({...}) so that a group's keys share one Redis Cluster slot. Default
	// "{replayguard}:"; kind redis only.
	Prefix string `yaml:"prefix,omitempty"`
	// AllowNotDurable starts on a shared store whose server can lose a
	// commit (PostgreSQL synchronous_commit off; Redis without appendonly
	// yes and appendfsync always): exactly-once then holds only while the
	// server does not crash. Readiness and a metric say so. Default false:
	// such a server is refused, naming the setting.
	AllowNotDurable bool `yaml:"allow_not_durable,omitempty"`
	// Journal is the member's local journal of what it committed to a
	// shared store, outside the store: the witness a store that failed
	// over is compared with, and the deliveries it lost, decided again
	// from it. Default path ./replayguard-journal, retention 15m, for
	// kinds redis and postgres; not used by other kinds.
	Journal JournalConfig `yaml:"journal,omitempty"`
	// AllowAsyncReplication starts on a shared store whose server
	// replicates without making a commit wait for a replica (PostgreSQL
	// streaming standbys with synchronous_standby_names empty; Redis
	// replicas with wait_replicas 0): a failover can lose acknowledged
	// commits, which only the journal brings back. Readiness and a metric
	// say so. Default false: such a server is refused, naming the setting.
	AllowAsyncReplication bool `yaml:"allow_async_replication,omitempty"`
	// WaitReplicas is how many Redis replicas must acknowledge each commit
	// (WAIT) before it counts. Default 0; kind redis only.
	WaitReplicas int `yaml:"wait_replicas,omitempty"`
	// CommitTimeout bounds one commit to a shared store, a wait for a
	// synchronous standby or for replicas included: past it the commit
	// counts as failed (nothing acknowledged) and the member is not ready,
	// never silently stuck. Default 30s; kinds redis and postgres.
	CommitTimeout Duration `yaml:"commit_timeout,omitempty"`
	// ReadTimeout bounds each read of a shared store the HTTP API makes
	// (state, sources, audit, quarantine, outbox, explain): past it the
	// request answers 503 with the store's error rather than wait for as
	// long as the server does. Default 5s; kinds redis and postgres.
	ReadTimeout Duration `yaml:"read_timeout,omitempty"`
}

// JournalConfig places a shared-store member's journal.
type JournalConfig struct {
	// Path is the directory holding the journals of the members run on this
	// machine (one subdirectory per member and store), or "off" for none:
	// a store that fails over is then found out only while the member
	// runs, and what it lost can only be accepted as lost. Default
	// ./replayguard-journal.
	Path string `yaml:"path,omitempty"`
	// Retention is how long a committed batch stays in the journal: the
	// longest a store failover can go unnoticed and still be recovered.
	// At most window.ttl. Default 15m.
	Retention Duration `yaml:"retention,omitempty"`
}

// JournalOff as store.journal.path keeps no journal.
const JournalOff = "off"

// Shared reports whether the store is one a consumer group shares.
func (s StoreConfig) Shared() bool { return s.Kind == StoreRedis || s.Kind == StorePostgres }

// Defaults of the shared stores.
const (
	DefaultStoreSchema = "replayguard"
	DefaultStorePrefix = "{replayguard}:"
)

// WindowConfig bounds the duplicate-detection windows.
type WindowConfig struct {
	// TTL is how long an id-route key stays in the key window. Default 2h.
	// Size it above the broker's session expiry plus retry delay.
	TTL Duration `yaml:"ttl"`
	// MaxEntries caps the key window; the oldest key is evicted first.
	// Default 1000000.
	MaxEntries int `yaml:"max_entries"`
	// SequenceSpan is how many sequences below the highest one a sequenced
	// source remembers. Default 4096; a multiple of 64 from 64 to 1<<20.
	SequenceSpan int `yaml:"sequence_span"`
	// KeepEpochs is how many older epoch windows are kept per source so
	// their replays are still caught. Default 2.
	KeepEpochs int `yaml:"keep_epochs"`
}

// LimitsConfig bounds what a single message may cost.
type LimitsConfig struct {
	// MaxPayload is the largest payload decoded; larger ones are malformed.
	// Default 256KiB. Accepts 262144, "256KiB", "1MiB", "512kB".
	MaxPayload ByteSize `yaml:"max_payload"`
}

// Route matches messages by topic filter and names the fields that identify
// them and the effects they have.
type Route struct {
	// Name identifies the route in keys, audit and metrics. Required,
	// unique, letters, digits, '_', '.', '-'.
	Name string `yaml:"name"`
	// Kind is how payloads are read: json (JSON, fields by dotted path) or
	// sparkplug (Eclipse Sparkplug B protobuf on spBv1.0/... topics, whose
	// source, sequence and epoch are implied and whose paths are
	// metrics.<Name>, timestamp.<Name>, is_historical.<Name>, timestamp,
	// seq and topic[N]). Default json.
	Kind string `yaml:"kind,omitempty"`
	// Topic is an MQTT topic filter. Required.
	Topic string `yaml:"topic"`
	// Source lists the paths (see ParsePath) whose values identify the
	// producer. Required, at least one.
	Source []string `yaml:"source"`
	// Sequence is the path of the producer's monotonic sequence number.
	// Optional; a route has Sequence or ID, not both.
	Sequence string `yaml:"sequence,omitempty"`
	// Epoch is the path of the producer's epoch (boot id). Optional, only
	// with Sequence.
	Epoch string `yaml:"epoch,omitempty"`
	// ID is the path of the producer's message id. Optional; a route has
	// Sequence or ID, not both.
	ID string `yaml:"id,omitempty"`
	// QoS is the subscription QoS. Default 1; 2 is allowed; 0 is refused
	// because exactly-once needs acknowledged delivery.
	QoS *int `yaml:"qos,omitempty"`
	// Effects run once for each applied message. Default none.
	Effects []Effect `yaml:"effects,omitempty"`
}

// Effect is one effect of an applied message, of one kind: a projection
// onto the state of one entity (Entity and its operations, each map from
// entity field name to payload path, see ParsePath); a sql statement run in
// the decision's own transaction (SQL and Args, PostgreSQL store only); or
// a forward of the original bytes through the outbox (Forward).
type Effect struct {
	// Entity is a template (see ParseTemplate) naming the entity. Required
	// but for a sql or forward effect.
	Entity string `yaml:"entity,omitempty"`
	// Add sums the value into the field (exact decimal). Default none.
	Add map[string]string `yaml:"add,omitempty"`
	// Set stores the value: of one source's messages the newest (epoch,
	// sequence) wins, of two sources' the one applied last unless it is
	// late. Default none.
	Set map[string]string `yaml:"set,omitempty"`
	// Max keeps the largest value seen. Default none.
	Max map[string]string `yaml:"max,omitempty"`
	// Min keeps the smallest value seen. Default none.
	Min map[string]string `yaml:"min,omitempty"`
	// SQL is a parameterised statement ($1, $2, ...) run in the decision's
	// transaction on the postgres store. Default none.
	SQL string `yaml:"sql,omitempty"`
	// Args fill the statement's parameters in order: payload paths,
	// topic[N], or @key, @route, @topic, @sequence, @epoch. A statement
	// whose message carries several values of a path it reads (a
	// Sparkplug metric sent more than once) runs once for each. Default
	// none.
	Args []string `yaml:"args,omitempty"`
	// Forward publishes the original bytes downstream after the commit,
	// carrying the idempotency key. Default none.
	Forward *Forward `yaml:"forward,omitempty"`
}

// Forward is where a forward effect delivers; exactly one field is set.
type Forward struct {
	// Topic is an MQTT topic template ({topic} is the message's own topic,
	// other placeholders are paths), published QoS 1 to outputs.mqtt.
	Topic string `yaml:"topic,omitempty"`
	// Webhook is a URL the payload is POSTed to, with an Idempotency-Key
	// header.
	Webhook string `yaml:"webhook,omitempty"`
	// NATS is a JetStream subject template, like Topic, published to
	// outputs.nats with Nats-Msg-Id set to the key.
	NATS string `yaml:"nats,omitempty"`
}

// MQTTConfig is how replayguard run connects to the broker.
type MQTTConfig struct {
	// Brokers are tried in order. Default [tcp://127.0.0.1:1883]. Schemes
	// tcp, mqtt, ssl, mqtts, ws, wss; host and port required. Empty
	// with Feeds.
	Brokers []string `yaml:"brokers,omitempty"`
	// Protocol is the MQTT version run speaks: 5, 3.1.1 or auto. Default
	// auto: at start each broker of the list is asked in turn for MQTT 5,
	// then for 3.1.1 when it refuses 5; the first broker that accepts one
	// decides the version for the whole list. Session expiry and receive
	// maximum are MQTT 5 settings: under 3.1.1 the broker's own
	// configuration bounds both.
	Protocol string `yaml:"protocol"`
	// ClientID keeps the persistent session. No default: run refuses an
	// empty or random-looking id (see ValidateRun).
	ClientID string `yaml:"client_id,omitempty"`
	// SessionExpiry is how long the broker keeps the session after a
	// disconnect. Default 1h; at most 2^32-1 seconds.
	SessionExpiry Duration `yaml:"session_expiry"`
	// CleanStart discards the broker session at connect. Default false.
	CleanStart bool `yaml:"clean_start"`
	// ShareGroup subscribes through $share/<group>/ so that members of a
	// consumer group split the feed. Default "" (no shared subscription).
	ShareGroup string `yaml:"share_group,omitempty"`
	// FormerShareGroups names the share groups this client id subscribed
	// in before: on a resumed session their $share subscriptions are
	// removed (and, in ShareGroup, the plain ones), so that a consumer
	// moved out of a group or into another does not get each message once
	// more through the old subscription its session kept. Moving into a
	// group needs no entry. Default none.
	FormerShareGroups []string `yaml:"former_share_groups,omitempty"`
	// AdoptLostAfter is how long a member of ShareGroup on a shared store
	// may stay cut off from its brokers while it still reaches the store
	// before a live member adopts its session (takes what the broker
	// queued for it and unsubscribes it from the group, on each path of
	// Feeds too), and how long the adopting member's own connection must
	// have been up first, so that after an outage of the broker for
	// everyone no member adopts another that is still reconnecting.
	// Default 45s; positive.
	AdoptLostAfter Duration `yaml:"adopt_lost_after"`
	// FormerFilters are topic filters this client id subscribed to before
	// and no route asks for now (a route removed, or its topic changed):
	// on a resumed session their subscriptions are removed, plain and in
	// the share groups above, so that their messages stop coming, each
	// held for want of a route. Default none.
	FormerFilters []string `yaml:"former_filters,omitempty"`
	// Username for the broker. Default "" (none).
	Username string `yaml:"username,omitempty"`
	// PasswordEnv names the environment variable holding the password.
	// Default "" (none); not together with PasswordFile.
	PasswordEnv string `yaml:"password_env,omitempty"`
	// PasswordFile names a file holding the password. Default "" (none).
	PasswordFile string `yaml:"password_file,omitempty"`
	// TLS configures ssl://, mqtts:// and wss:// brokers. Default: system
	// roots, no client certificate.
	TLS TLSConfig `yaml:"tls,omitempty"`
	// KeepAlive is the MQTT keep-alive interval. Default 30s.
	KeepAlive Duration `yaml:"keep_alive"`
	// BatchSize caps the messages committed in one transaction. Default 1024.
	BatchSize int `yaml:"batch_size"`
	// BatchLinger is how long a batch waits for more messages. Default 1ms.
	BatchLinger Duration `yaml:"batch_linger"`
	// ReceiveMaximum caps unacknowledged deliveries in flight. Default
	// 2048, or 2 × batch_size when that is more (a batch committing and
	// the next one collected); 1 to 65535, at least batch_size.
	ReceiveMaximum int `yaml:"receive_maximum"`
	// Feeds are redundant broker paths consumed at the same time into one
	// engine, each its own persistent session: a message's copy from the
	// other path is a duplicate, and a message one path lost comes from
	// the other. When set, Brokers stays empty. Default none.
	Feeds []MQTTFeed `yaml:"feeds,omitempty"`
}

// MQTTFeed is one broker path of mqtt.feeds. What it leaves unset it takes
// from mqtt (protocol, username, password, TLS); its session settings
// (expiry, keep-alive, batches) are mqtt's.
type MQTTFeed struct {
	// Name names the feed in audit records, metrics and logs. Required:
	// letters, digits, '-' and '_'.
	Name string `yaml:"name"`
	// Brokers are tried in order, as mqtt.brokers are. Required.
	Brokers []string `yaml:"brokers"`
	// ClientID keeps the feed's persistent session. Default
	// <mqtt.client_id>-<name>.
	ClientID string `yaml:"client_id,omitempty"`
	// Protocol is 5, 3.1.1 or auto, negotiated per feed. Default
	// mqtt.protocol.
	Protocol string `yaml:"protocol,omitempty"`
	// Username, PasswordEnv, PasswordFile and TLS default to mqtt's.
	Username     string     `yaml:"username,omitempty"`
	PasswordEnv  string     `yaml:"password_env,omitempty"`
	PasswordFile string     `yaml:"password_file,omitempty"`
	TLS          *TLSConfig `yaml:"tls,omitempty"`
}

// TLSConfig holds file names for a TLS connection; the files are read by
// whoever opens the connection, never by this package.
type TLSConfig struct {
	// CAFile verifies the peer. Default "" (system roots for a client; no
	// client certificates asked for a server).
	CAFile string `yaml:"ca_file,omitempty"`
	// CertFile is this side's certificate. Default "" (none); with KeyFile.
	CertFile string `yaml:"cert_file,omitempty"`
	// KeyFile is CertFile's private key. Default "" (none); with CertFile.
	KeyFile string `yaml:"key_file,omitempty"`
	// InsecureSkipVerify skips verifying the broker. Default false. Clients
	// only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify,omitempty"`
}

// HTTPConfig is the API, metrics and dashboard server.
type HTTPConfig struct {
	// Listen is host:port. Default 127.0.0.1:9780; "off" (or an explicit
	// empty value in the file) disables the server.
	Listen string `yaml:"listen"`
	// TokenEnv names the environment variable holding the bearer token:
	// one token with role operator, named "operator" in the audit.
	// Default "" (none); not together with TokenFile or Tokens.
	TokenEnv string `yaml:"token_env,omitempty"`
	// TokenFile names a file holding the bearer token. Default "" (none).
	TokenFile string `yaml:"token_file,omitempty"`
	// Tokens are named bearer tokens, each with a role; the audit record
	// of a release, discard, retry or drop names the token that asked. Default none;
	// not together with TokenEnv or TokenFile.
	Tokens []TokenConfig `yaml:"tokens,omitempty"`
	// AuthReads requires a token for reads too, not only for changes.
	// Default false.
	AuthReads bool `yaml:"auth_reads"`
	// TLS serves HTTPS when CertFile and KeyFile are set; CAFile then asks
	// for client certificates. Default: plain HTTP.
	TLS TLSConfig `yaml:"tls,omitempty"`
}

// The roles of an HTTP token.
const (
	RoleViewer   = "viewer"   // reads
	RoleOperator = "operator" // reads, releases and discards, retries and drops outbox entries
)

// TokenConfig is one named bearer token of the HTTP API.
type TokenConfig struct {
	// Name says who holds the token; the audit records of its releases,
	// discards, retries and drops carry it. Required, unique; never a metrics label.
	Name string `yaml:"name"`
	// TokenEnv names the environment variable holding the token.
	// Exactly one of TokenEnv and TokenFile.
	TokenEnv string `yaml:"token_env,omitempty"`
	// TokenFile names a file holding the token.
	TokenFile string `yaml:"token_file,omitempty"`
	// Role is viewer (reads) or operator (reads, release and discard,
	// outbox retry and drop).
	// Required: no default, so a token never holds more than was written.
	Role string `yaml:"role"`
}

// HasToken reports whether any bearer token is configured, in either form.
func (h HTTPConfig) HasToken() bool {
	return h.TokenEnv != "" || h.TokenFile != "" || len(h.Tokens) > 0
}

// TokenList returns the configured tokens: Tokens, or the single
// token_env/token_file as one named "operator" with role operator.
func (h HTTPConfig) TokenList() []TokenConfig {
	if h.TokenEnv != "" || h.TokenFile != "" {
		return []TokenConfig{{Name: RoleOperator, TokenEnv: h.TokenEnv, TokenFile: h.TokenFile, Role: RoleOperator}}
	}
	return h.Tokens
}

// Enabled reports whether the HTTP server should run.
func (h HTTPConfig) Enabled() bool { return h.Listen != ListenOff && h.Listen != "" }

// Scheme is the API's URL scheme: https when http.tls gives a certificate.
func (h HTTPConfig) Scheme() string {
	if h.TLS.CertFile != "" {
		return "https"
	}
	return "http"
}

// Default returns the configuration used when a file sets nothing: every
// default, no routes.
func Default() *Config {
	c := &Config{}
	c.SetDefaults()
	return c
}

// SetDefaults fills every field left at its zero value with its default.
// It never overwrites a value that is set.
func (c *Config) SetDefaults() {
	setString(&c.Store.Kind, DefaultStoreKind)
	switch c.Store.Kind {
	case StoreEmbedded:
		setString(&c.Store.Path, DefaultStorePath)
		setInt(&c.Store.CachedRows, DefaultCachedRows)
	case StorePostgres:
		setString(&c.Store.Schema, DefaultStoreSchema)
	case StoreRedis:
		setString(&c.Store.Prefix, DefaultStorePrefix)
	}
	if c.Store.Shared() {
		setString(&c.Store.Journal.Path, DefaultJournalPath)
		setDuration(&c.Store.Journal.Retention, DefaultJournalRetain)
		setDuration(&c.Store.CommitTimeout, DefaultCommitTimeout)
		setDuration(&c.Store.ReadTimeout, DefaultReadTimeout)
	}
	setDuration(&c.Window.TTL, DefaultTTL)
	setInt(&c.Window.MaxEntries, DefaultMaxEntries)
	setInt(&c.Window.SequenceSpan, DefaultSequenceSpan)
	setInt(&c.Window.KeepEpochs, DefaultKeepEpochs)
	if c.Limits.MaxPayload == 0 {
		c.Limits.MaxPayload = DefaultMaxPayload
	}
	for i := range c.Routes {
		setString(&c.Routes[i].Kind, RouteJSON)
		if c.Routes[i].QoS == nil {
			q := DefaultQoS
			c.Routes[i].QoS = &q
		}
	}
	m := &c.MQTT
	if len(m.Brokers) == 0 && m.Feeds == nil {
		m.Brokers = []string{DefaultBroker}
	}
	setString(&m.Protocol, DefaultMQTTProtocol)
	for i := range m.Feeds {
		m.Feeds[i].setDefaults(m)
	}
	setDuration(&m.SessionExpiry, DefaultSessionExpiry)
	setDuration(&m.AdoptLostAfter, DefaultAdoptLostAfter)
	setDuration(&m.KeepAlive, DefaultKeepAlive)
	setInt(&m.BatchSize, DefaultBatchSize)
	setDuration(&m.BatchLinger, DefaultBatchLinger)
	setInt(&m.ReceiveMaximum, min(65535, max(DefaultReceiveMaximum, 2*m.BatchSize))) // room for the next batch while one commits
	setString(&c.HTTP.Listen, DefaultHTTPListen)
	c.Audit.setDefaults()
	c.setOutputDefaults()
	c.setInputDefaults()
}

// setDefaults fills what the feed leaves unset from mqtt's settings.
func (f *MQTTFeed) setDefaults(m *MQTTConfig) {
	if f.ClientID == "" && m.ClientID != "" && f.Name != "" {
		f.ClientID = m.ClientID + "-" + f.Name
	}
	setString(&f.Protocol, m.Protocol)
	setString(&f.Username, m.Username)
	if f.PasswordEnv == "" && f.PasswordFile == "" {
		f.PasswordEnv, f.PasswordFile = m.PasswordEnv, m.PasswordFile
	}
	if f.TLS == nil {
		t := m.TLS
		f.TLS = &t
		return
	}
	// A feed's tls block is its own but for the client certificate: one it
	// leaves unset is mqtt's. Its ca_file is its own (unset: the system's
	// roots, for a path whose broker has a public certificate), and so is
	// whether it verifies its broker.
	if f.TLS.CertFile == "" && f.TLS.KeyFile == "" {
		f.TLS.CertFile, f.TLS.KeyFile = m.TLS.CertFile, m.TLS.KeyFile
	}
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func setDuration(p *Duration, v Duration) {
	if *p == 0 {
		*p = v
	}
}
