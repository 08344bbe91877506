package config

import (
	"fmt"
	"net/url"
	"time"
)

// Defaults of the forward effect's outputs and outbox.
const (
	DefaultOutboxMaxEntries = 100_000
	DefaultWebhookTimeout   = Duration(10 * time.Second)
	DefaultWebhookBackoff   = Duration(30 * time.Second)
	DefaultNATSURL          = "nats://127.0.0.1:4222"
	// OutputClientIDSuffix follows mqtt.client_id in the default client id
	// of outputs.mqtt.
	OutputClientIDSuffix = "-out"
	// ProbeClientIDSuffix follows a consumer's client id in the id its
	// MQTT version probe connects under, with a clean start.
	ProbeClientIDSuffix = "-probe"
)

// OutputsConfig says how the forward effects reach their downstream
// systems. An output is filled with its defaults when a route forwards to
// it or the file names it, and left out otherwise.
type OutputsConfig struct {
	// MQTT is the broker connection of forward: {topic: …}. Default: the
	// consumer's own mqtt.brokers, username, password and TLS, with client
	// id <mqtt.client_id>-out.
	MQTT *OutputMQTTConfig `yaml:"mqtt,omitempty"`
	// Webhook tunes forward: {webhook: URL}. Default timeout 10s,
	// max_backoff 30s.
	Webhook *OutputWebhookConfig `yaml:"webhook,omitempty"`
	// NATS is the server of forward: {nats: SUBJECT}. Default url
	// nats://127.0.0.1:4222.
	NATS *OutputNATSConfig `yaml:"nats,omitempty"`
}

// OutputMQTTConfig is the MQTT connection the forwarded copies are
// published on, QoS 1, a clean session of its own.
type OutputMQTTConfig struct {
	// Brokers are tried in order. Default mqtt.brokers. Schemes tcp, mqtt,
	// ssl, mqtts; host and port required.
	Brokers []string `yaml:"brokers"`
	// ClientID of the connection, never the consumer's own. Default
	// <mqtt.client_id>-out; without either, a command other than run
	// (ingest) names one of its own for the process.
	ClientID string `yaml:"client_id,omitempty"`
	// Username for the broker. Default mqtt.username when brokers is not
	// set, else "" (none).
	Username string `yaml:"username,omitempty"`
	// PasswordEnv names the environment variable holding the password.
	// Default as username; not together with PasswordFile.
	PasswordEnv string `yaml:"password_env,omitempty"`
	// PasswordFile names a file holding the password. Default as username.
	PasswordFile string `yaml:"password_file,omitempty"`
	// TLS configures ssl:// and mqtts:// brokers. Default mqtt.tls when
	// brokers is not set, else the system roots.
	TLS TLSConfig `yaml:"tls,omitempty"`
	// KeepAlive is the MQTT keep-alive interval. Default mqtt.keep_alive.
	KeepAlive Duration `yaml:"keep_alive"`
}

// MinRequestTimeout is the shortest timeout of a webhook POST or an otlp
// sink's export: below it a request times out before a receiver can
// answer (1ns, which was taken, let none through).
const MinRequestTimeout = Duration(100 * time.Millisecond)

// MinWebhookBackoff is the first wait after a failed delivery (the
// drainer's forward.DefaultMinBackoff), and the smallest
// outputs.webhook.max_backoff: a cap below it would make the wait shorter
// than the first, down to none.
const MinWebhookBackoff = Duration(100 * time.Millisecond)

// OutputWebhookConfig tunes the webhook POSTs.
type OutputWebhookConfig struct {
	// Timeout bounds one POST, the response included: at least 100ms.
	// Default 10s.
	Timeout Duration `yaml:"timeout"`
	// MaxBackoff caps the jittered, doubling wait between attempts after
	// a 5xx, a timeout or a connection error, which starts at
	// MinWebhookBackoff; at least that. Default 30s.
	MaxBackoff Duration `yaml:"max_backoff"`
	// TLS verifies https:// receivers with ca_file and presents cert_file
	// and key_file to them. Default: the system roots.
	TLS TLSConfig `yaml:"tls,omitempty"`
}

// OutputNATSConfig is the NATS server the JetStream publishes go to.
type OutputNATSConfig struct {
	// URL of the server; a comma-separated list for a cluster. Default
	// nats://127.0.0.1:4222. Schemes nats, tls.
	URL string `yaml:"url"`
	// TLS configures the connection. Default: plain, or the system roots
	// for a tls:// URL.
	TLS TLSConfig `yaml:"tls,omitempty"`
}

// OutboxConfig bounds the outbox of pending forward entries.
type OutboxConfig struct {
	// MaxEntries is the most pending entries this member's outbox holds:
	// at that depth the consumer stops committing, and so acknowledging
	// upstream, until the drainer made room. A batch admitted just below it
	// may pass it by its own entries; so run refuses a bound below what one
	// batch can add (mqtt.batch_size, or jetstream.batch_size, times the
	// most forward effects of a route), which every batch would pass, and
	// ingest one below its --batch times that. Default 100000.
	MaxEntries int `yaml:"max_entries"`
}

// ForwardKinds returns which outputs the routes forward to: a subset of
// "mqtt", "webhook", "nats", in that order.
func (c *Config) ForwardKinds() []string {
	var topic, hook, nats bool
	for _, r := range c.Routes {
		for _, e := range r.Effects {
			if f := e.Forward; f != nil {
				topic, hook, nats = topic || f.Topic != "", hook || f.Webhook != "", nats || f.NATS != ""
			}
		}
	}
	var out []string
	for _, k := range []struct {
		on   bool
		name string
	}{{topic, "mqtt"}, {hook, "webhook"}, {nats, "nats"}} {
		if k.on {
			out = append(out, k.name)
		}
	}
	return out
}

// OutputKinds returns the outputs a process builds: those the routes
// forward to and those the file names under outputs (a forward removed
// from the routes may have left entries in the outbox, which such an
// output still delivers), in the order of ForwardKinds.
func (c *Config) OutputKinds() []string {
	fwd := c.ForwardKinds()
	var out []string
	for _, k := range []struct {
		named bool
		name  string
	}{{c.Outputs.MQTT != nil, "mqtt"}, {c.Outputs.Webhook != nil, "webhook"}, {c.Outputs.NATS != nil, "nats"}} {
		if k.named || contains(fwd, k.name) {
			out = append(out, k.name)
		}
	}
	return out
}

func (c *Config) setOutputDefaults() {
	setInt(&c.Outbox.MaxEntries, DefaultOutboxMaxEntries)
	kinds := c.ForwardKinds()
	// With mqtt.feeds the output connects as the first feed does, unless
	// told otherwise: its brokers, credentials and TLS.
	m := c.MQTT
	brokers, clientID := m.Brokers, m.ClientID
	if len(m.Feeds) > 0 {
		f := m.Feeds[0]
		brokers, m.Username, m.PasswordEnv, m.PasswordFile = f.Brokers, f.Username, f.PasswordEnv, f.PasswordFile
		if f.TLS != nil {
			m.TLS = *f.TLS
		}
		if clientID == "" {
			clientID = f.ClientID
		}
	}
	if c.Outputs.MQTT == nil && contains(kinds, "mqtt") {
		c.Outputs.MQTT = &OutputMQTTConfig{}
	}
	if o := c.Outputs.MQTT; o != nil {
		// Without brokers of its own the output connects where the
		// consumer does, and so as it does: each credential and the TLS
		// the file does not set for the output are the consumer's.
		if len(o.Brokers) == 0 {
			o.Brokers = append([]string(nil), brokers...)
			if o.Username == "" {
				o.Username = m.Username
			}
			if o.PasswordEnv == "" && o.PasswordFile == "" {
				o.PasswordEnv, o.PasswordFile = m.PasswordEnv, m.PasswordFile
			}
			if o.TLS == (TLSConfig{}) {
				o.TLS = m.TLS
			}
		}
		if o.ClientID == "" && clientID != "" {
			o.ClientID = clientID + OutputClientIDSuffix
		}
		setDuration(&o.KeepAlive, c.MQTT.KeepAlive)
	}
	if c.Outputs.Webhook == nil && contains(kinds, "webhook") {
		c.Outputs.Webhook = &OutputWebhookConfig{}
	}
	if o := c.Outputs.Webhook; o != nil {
		setDuration(&o.Timeout, DefaultWebhookTimeout)
		setDuration(&o.MaxBackoff, DefaultWebhookBackoff)
	}
	if c.Outputs.NATS == nil && contains(kinds, "nats") {
		c.Outputs.NATS = &OutputNATSConfig{}
	}
	if o := c.Outputs.NATS; o != nil {
		setString(&o.URL, DefaultNATSURL)
	}
}

// checkOutputs refuses a forward whose output has no usable
// configuration, and settings that cannot work.
func (c *Config) checkOutputs(ps *problems) {
	f := field{}.dot("outputs")
	if c.Outbox.MaxEntries < 1 {
		ps.add(field{}.dot("outbox").dot("max_entries"), "max_entries must be at least 1, got %d", c.Outbox.MaxEntries)
	}
	if o := c.Outputs.MQTT; o != nil {
		c.checkOutputMQTT(ps, f.dot("mqtt"), o)
	}
	if o := c.Outputs.Webhook; o != nil {
		switch {
		case o.Timeout <= 0:
			ps.add(f.dot("webhook").dot("timeout"), "timeout must be positive, got %v", o.Timeout)
		case o.Timeout < MinRequestTimeout:
			ps.add(f.dot("webhook").dot("timeout"), "timeout %v is below %v: a POST would time out before its receiver could answer, and the outbox fill up undelivered",
				o.Timeout, MinRequestTimeout)
		}
		switch {
		case o.MaxBackoff <= 0:
			ps.add(f.dot("webhook").dot("max_backoff"), "max_backoff must be positive, got %v", o.MaxBackoff)
		case o.MaxBackoff < MinWebhookBackoff:
			ps.add(f.dot("webhook").dot("max_backoff"), "max_backoff %v is below %v, the first wait after a failed delivery: a receiver that is down would be retried back to back",
				o.MaxBackoff, MinWebhookBackoff)
		}
		o.TLS.checkPair(ps, f.dot("webhook").dot("tls"))
	}
	if o := c.Outputs.NATS; o != nil {
		checkNATSURL(ps, f.dot("nats").dot("url"), o.URL)
		o.TLS.checkPair(ps, f.dot("nats").dot("tls"))
	}
}

func (c *Config) checkOutputMQTT(ps *problems, f field, o *OutputMQTTConfig) {
	if len(o.Brokers) == 0 {
		ps.add(f.dot("brokers"), "brokers is empty: list at least one, like tcp://127.0.0.1:1883")
	}
	for i, b := range o.Brokers {
		bf := f.dot("brokers").index(i)
		checkBroker(ps, bf, b)
		if u, err := url.Parse(b); err == nil && (u.Scheme == "ws" || u.Scheme == "wss") {
			ps.add(bf, "broker %q: the forward output publishes over tcp://, mqtt://, ssl:// or mqtts://, not WebSocket: set outputs.mqtt.brokers", u.Redacted())
		}
	}
	if o.ClientID != "" && o.ClientID == c.MQTT.ClientID {
		ps.add(f.dot("client_id"), "client_id %q is the consumer's own: two connections with one id take the session from each other", o.ClientID)
	}
	for i, fd := range c.MQTT.Feeds {
		if o.ClientID != "" && o.ClientID == fd.ClientID {
			ps.add(f.dot("client_id"), "client_id %q is mqtt.feeds[%d]'s (%s): two connections with one id take the session from each other; name the feed otherwise, or set outputs.mqtt.client_id", o.ClientID, i, fd.Name)
		}
	}
	if o.PasswordEnv != "" && o.PasswordFile != "" {
		ps.add(f, "password_env and password_file are both set: keep one")
	}
	if ka := o.KeepAlive; ka <= 0 || ka > Duration(65535*time.Second) || ka%Duration(time.Second) != 0 {
		ps.add(f.dot("keep_alive"), "keep_alive must be a whole number of seconds from 1s to 65535s, got %s", ka)
	}
	o.TLS.checkPair(ps, f.dot("tls"))
}

// BatchOutboxEntries is the most outbox entries one batch of batch
// messages can add: batch times the most forward effects of a route, and
// that route's name; 0 when no route forwards.
func (c *Config) BatchOutboxEntries(batch int) (n int, route string) {
	most := 0
	for _, r := range c.Routes {
		fw := 0
		for _, e := range r.Effects {
			if e.Forward != nil {
				fw++
			}
		}
		if fw > most {
			most, route = fw, r.Name
		}
	}
	return batch * most, route
}

// OutboxBoundProblem says why outbox.max_entries cannot bound the outbox
// of batches of batch messages, which setting names (setting), or "": a
// bound below one batch's entries is passed by every batch, so readiness
// turns to "outbox full" and back with each.
func (c *Config) OutboxBoundProblem(batch int, setting string) string {
	n, route := c.BatchOutboxEntries(batch)
	if n <= c.Outbox.MaxEntries {
		return ""
	}
	per := ""
	if n != batch {
		per = fmt.Sprintf(" × %d forward effects of route %s", n/batch, route)
	}
	return fmt.Sprintf("max_entries %d is below what one batch can add, %s %d%s = %d entries: every batch would pass the bound, "+
		"and readiness turn to \"outbox full\" and back with each; raise outbox.max_entries to at least %d or lower %s",
		c.Outbox.MaxEntries, setting, batch, per, n, n, setting)
}

// checkOutboxBound refuses an outbox bound the run's batches pass.
func (c *Config) checkOutboxBound(ps *problems) {
	if c.Outbox.MaxEntries < 1 {
		return // said by checkOutputs
	}
	batch, setting := c.MQTT.BatchSize, "mqtt.batch_size"
	if c.Input == InputJetStream && c.JetStream != nil {
		batch, setting = c.JetStream.BatchSize, "jetstream.batch_size"
	}
	if why := c.OutboxBoundProblem(batch, setting); why != "" {
		ps.add(field{}.dot("outbox").dot("max_entries"), "%s", why)
	}
}
