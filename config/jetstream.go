package config

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Inputs accepted in input: where replayguard run consumes from.
const (
	InputMQTT      = "mqtt"
	InputJetStream = "jetstream"
	DefaultInput   = InputMQTT
)

// Defaults of the jetstream section.
const (
	DefaultJetStreamURL  = "nats://127.0.0.1:4222"
	DefaultMaxAckPending = 2048
	DefaultAckWait       = Duration(30 * time.Second)
	// DefaultJetStreamBatch is larger than MQTT's, whose brokers send no
	// more than their in-flight window at a time: a JetStream consumer
	// drains a stream's backlog, and each batch costs a commit and a pull.
	DefaultJetStreamBatch = 1024
	// MaxBatch is the most messages one batch takes, from any input: as
	// many as an MQTT broker may have in flight to one client
	// (receive_maximum's largest). A batch is one transaction, held in
	// memory with its decisions and records.
	MaxBatch = 65535
	// MinAckWait is the shortest ack_wait accepted: below it a batch in
	// hand is redelivered before it can commit.
	MinAckWait = Duration(time.Second)
	// ackWaitWarn is the ack_wait below which lint and run warn: a store
	// that takes seconds to commit makes the server redeliver messages the
	// consumer still holds.
	ackWaitWarn = Duration(5 * time.Second)
)

// JetStreamConfig is how replayguard run consumes a NATS JetStream stream
// (input: jetstream): through a durable pull consumer with explicit acks,
// sent only after each batch's commit. A message's subject becomes its
// topic for the routes: each '.'-separated token is a topic level (see
// source/jetstream.SubjectToTopic), so plant.m1.energy is plant/m1/energy.
type JetStreamConfig struct {
	// URL of the server; a comma-separated list for a cluster. Default
	// nats://127.0.0.1:4222. Schemes nats, tls; credentials belong in
	// creds_file, not the URL.
	URL string `yaml:"url"`
	// TLS configures the connection. Default: plain, or the system roots
	// for a tls:// URL.
	TLS TLSConfig `yaml:"tls,omitempty"`
	// CredsFile is a NATS credentials file (user JWT and nkey seed).
	// Default "" (none).
	CredsFile string `yaml:"creds_file,omitempty"`
	// Stream is the stream to consume. Required.
	Stream string `yaml:"stream"`
	// Consumer is the durable consumer's name, created on the stream at the
	// first start (delivering the stream from its first message) and bound
	// again at every later start: the server keeps what it acknowledged.
	// Required, and fixed like an MQTT client id: a new consumer delivers
	// the stream from its first message, so once the store holds this
	// member's decisions run refuses to create one, naming how to create it
	// at the right sequence. It is also the default store.member.
	Consumer string `yaml:"consumer"`
	// Subjects filter the stream's subjects the consumer takes. Default
	// none: every subject of the stream. More than one needs nats-server
	// 2.10 or later. Widened on an existing consumer, past a message of an
	// added subject it would pass over (the server keeps its position), run
	// refuses to start.
	Subjects []string `yaml:"subjects,omitempty"`
	// MaxAckPending is how many messages the server lets the consumer hold
	// unacknowledged: the in-flight bound, and the backpressure a slow or
	// failing store exerts. Default 2048, or 2 × batch_size when that is
	// more (a batch committing and the next one collected); at least
	// batch_size.
	MaxAckPending int `yaml:"max_ack_pending"`
	// AckWait is how long the server waits for a message's ack before it
	// delivers it again. Default 30s; at least 1s. The consumer tells the
	// server, every quarter to half of it, that the messages it holds are in
	// progress, however long their commit or its retries take, so ack_wait
	// bounds how long a consumer that crashed or lost its connection keeps
	// its messages, not a commit.
	AckWait Duration `yaml:"ack_wait"`
	// BatchSize caps the messages committed in one transaction. Default 1024.
	BatchSize int `yaml:"batch_size"`
	// BatchLinger is how long a batch waits for more messages. Default 1ms.
	BatchLinger Duration `yaml:"batch_linger"`
}

func (c *Config) setInputDefaults() {
	setString(&c.Input, DefaultInput)
	if c.JetStream == nil && c.Input == InputJetStream {
		c.JetStream = &JetStreamConfig{}
	}
	j := c.JetStream
	if j == nil {
		return
	}
	setString(&j.URL, DefaultJetStreamURL)
	setInt(&j.BatchSize, DefaultJetStreamBatch)
	setDuration(&j.BatchLinger, DefaultBatchLinger)
	setInt(&j.MaxAckPending, max(DefaultMaxAckPending, 2*j.BatchSize))
	setDuration(&j.AckWait, DefaultAckWait)
}

// natsName is what a stream or consumer name may hold: no whitespace,
// no '.', '*', '>', and no path separators (the server names files after
// them).
var natsName = regexp.MustCompile(`^[^\s.*>/\\]+$`)

func (c *Config) checkInput(ps *problems) {
	switch c.Input {
	case InputMQTT, InputJetStream:
	default:
		ps.add(field{}.dot("input"), "input %q is not mqtt or jetstream", c.Input)
	}
	if c.JetStream != nil {
		c.JetStream.check(ps, field{}.dot("jetstream"))
	}
	if c.Input == InputJetStream && len(c.MQTT.Feeds) > 0 {
		ps.add(field{}.dot("mqtt").dot("feeds"), "feeds are MQTT broker paths: input is jetstream")
	}
}

func (j *JetStreamConfig) check(ps *problems, f field) {
	checkNATSURL(ps, f.dot("url"), j.URL)
	j.TLS.checkPair(ps, f.dot("tls"))
	if j.Stream == "" {
		ps.add(f.dot("stream"), "stream is required: name the JetStream stream to consume (or set %s)", EnvJetStreamStream)
	} else if !natsName.MatchString(j.Stream) {
		ps.add(f.dot("stream"), "stream %q is not a JetStream name: no spaces, '.', '*', '>', '/' or '\\'", j.Stream)
	}
	if j.Consumer != "" && !natsName.MatchString(j.Consumer) {
		ps.add(f.dot("consumer"), "consumer %q is not a JetStream name: no spaces, '.', '*', '>', '/' or '\\'", j.Consumer)
	}
	for i, s := range j.Subjects {
		if msg := subjectFilterProblem(s); msg != "" {
			ps.add(f.dot("subjects").index(i), "subject %q %s", s, msg)
		} else if slices.Index(j.Subjects, s) < i {
			ps.add(f.dot("subjects").index(i), "subject %q is listed twice", s)
		}
	}
	if j.BatchSize < 1 || j.BatchSize > MaxBatch {
		ps.add(f.dot("batch_size"), "batch_size must be from 1 to %d (one transaction, held in memory), got %d", MaxBatch, j.BatchSize)
	}
	if j.BatchLinger < 0 {
		ps.add(f.dot("batch_linger"), "batch_linger must not be negative")
	}
	switch {
	case j.MaxAckPending < 1:
		ps.add(f.dot("max_ack_pending"), "max_ack_pending must be at least 1, got %d", j.MaxAckPending)
	case j.BatchSize > j.MaxAckPending:
		ps.add(f.dot("max_ack_pending"), "max_ack_pending %d is below batch_size %d: the server stops delivering before a batch can fill", j.MaxAckPending, j.BatchSize)
	}
	if j.AckWait < MinAckWait {
		ps.add(f.dot("ack_wait"), "ack_wait %s is below %s: the server would deliver a batch again while it is being committed", j.AckWait, MinAckWait)
	}
}

// checkNATSURL checks a comma-separated list of nats:// or tls:// URLs.
func checkNATSURL(ps *problems, f field, list string) {
	for _, s := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		switch {
		case err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Hostname() == "":
			ps.add(f, "url %q is not a nats://host:port or tls://host:port URL", redactNATSURL(s))
		case u.Port() != "" && !validPort(u.Port(), 1):
			ps.add(f, "url %q: port %q is not from 1 to 65535", redactNATSURL(s), u.Port())
		case u.User != nil && f.key == "jetstream.url":
			ps.add(f, "url %q carries credentials: put them in jetstream.creds_file instead", redactNATSURL(s))
		}
	}
}

// subjectFilterProblem says why s is not a NATS subject filter, or "".
func subjectFilterProblem(s string) string {
	if s == "" {
		return "is empty"
	}
	if strings.ContainsFunc(s, unicode.IsSpace) {
		return "holds whitespace"
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		switch {
		case t == "":
			return "has an empty token (a leading, trailing or doubled '.')"
		case strings.Contains(t, ">") && (t != ">" || i != len(tokens)-1):
			return "has '>' that is not the whole last token"
		case strings.Contains(t, "*") && t != "*":
			return "has '*' that is not a whole token"
		}
	}
	return ""
}

// checkRunJetStream is checkRun's part for input jetstream: the durable
// consumer's name must be fixed.
func (c *Config) checkRunJetStream(ps *problems) {
	f := field{}.dot("jetstream").dot("consumer")
	id := c.JetStream.Consumer
	switch {
	case strings.TrimSpace(id) == "":
		ps.add(f, "consumer is empty: a durable consumer needs a fixed name, like replayguard (or set %s)", EnvJetStreamConsumer)
	case strings.ContainsAny(id, "$%{}"):
		ps.add(f, "consumer %q holds an unexpanded placeholder: write ${VAR} to take it from the environment", id)
	case uuidLike.MatchString(id) || longHex.MatchString(id) || podName.MatchString(id):
		ps.add(f, "consumer %q looks generated: a durable consumer needs the same name at every start, or it starts over from the stream's first message", id)
	}
}

// jetStreamWarnings lists valid jetstream settings likely to cost work.
func (c *Config) jetStreamWarnings(warn func(path, msg string)) {
	j := c.JetStream
	if j == nil {
		return
	}
	if c.Input != InputJetStream {
		warn("jetstream", "the jetstream section is set but input is "+c.Input+": run consumes from MQTT and ignores it")
		return
	}
	if j.AckWait < ackWaitWarn {
		warn("jetstream.ack_wait", "ack_wait "+j.AckWait.String()+" is short: a consumer that stalls or loses its connection for longer has the messages it holds delivered again; the copies are found duplicate, but the work is done twice")
	}
	if j.TLS.InsecureSkipVerify {
		warn("jetstream.tls.insecure_skip_verify", "the server's certificate is not verified")
	}
}

func (j *JetStreamConfig) clone() *JetStreamConfig {
	if j == nil {
		return nil
	}
	d := *j
	d.Subjects = slices.Clone(j.Subjects)
	return &d
}
