package config

import (
	"bytes"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Marshal returns the effective configuration as YAML for replayguard
// config print, every default filled in but store.member (whose default
// depends on the command: see StoreConfig.Member) and the client ids
// derived from mqtt.client_id (a feed's <client_id>-<name>, outputs.mqtt's
// <client_id>-out), which are left out so that each member given the output
// derives its own again. c itself is not changed. Parse reads the output
// back to an equal Config, except that a
// secret reads back as "xxxxx". Secrets never appear: the configuration
// holds only the names of the variables and files that carry most of them;
// a password in a store, broker, webhook or NATS URL, the user of a webhook
// or NATS URL without a password (a token), and the value of every header
// of an audit sink are shown redacted.
func (c *Config) Marshal() ([]byte, error) {
	d := c.clone()
	d.SetDefaults()
	d.underive()
	d.redact()
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(escapeDollars(buf.String())), nil
}

// underive clears, in c (a clone with its defaults set), the client ids
// that SetDefaults derives from mqtt.client_id and that hold the value it
// derives: printed, they would pin every member given the output to this
// one's sessions. Read back, each derives the same again.
func (c *Config) underive() {
	m := &c.MQTT
	out := m.ClientID
	for i := range m.Feeds {
		f := &m.Feeds[i]
		if i == 0 && out == "" {
			out = f.ClientID // outputs.mqtt's default follows the first feed's id then
		}
		if m.ClientID != "" && f.ClientID == m.ClientID+"-"+f.Name {
			f.ClientID = ""
		}
	}
	if o := c.Outputs.MQTT; o != nil && out != "" && o.ClientID == out+OutputClientIDSuffix {
		o.ClientID = ""
	}
}

// redact replaces the secrets of c, a clone, with "xxxxx".
func (c *Config) redact() {
	c.Store.URL = redactURL(c.Store.URL)
	for i, b := range c.MQTT.Brokers {
		c.MQTT.Brokers[i] = redactURL(b)
	}
	for _, f := range c.MQTT.Feeds {
		for i, b := range f.Brokers {
			f.Brokers[i] = redactURL(b)
		}
	}
	if o := c.Outputs.MQTT; o != nil {
		for i, b := range o.Brokers {
			o.Brokers[i] = redactURL(b)
		}
	}
	if o := c.Outputs.NATS; o != nil {
		o.URL = redactNATSURL(o.URL)
	}
	if j := c.JetStream; j != nil {
		j.URL = redactNATSURL(j.URL)
	}
	for _, r := range c.Routes {
		for _, e := range r.Effects {
			if e.Forward != nil && e.Forward.Webhook != "" {
				e.Forward.Webhook = redactTemplateURL(e.Forward.Webhook)
			}
		}
	}
	// A sink's headers carry its credentials (an API key, an
	// Authorization): their names show, their values never.
	for _, s := range c.Audit.Sinks {
		for k := range s.Headers {
			s.Headers[k] = redacted
		}
	}
}

// redacted stands in for a secret in the printed configuration.
const redacted = "xxxxx"

// clone copies c deeply enough that SetDefaults and redaction on the copy
// leave c alone.
func (c *Config) clone() *Config {
	d := *c
	d.Routes = slices.Clone(c.Routes)
	for i, r := range d.Routes {
		if r.QoS != nil {
			q := *r.QoS
			d.Routes[i].QoS = &q
		}
		d.Routes[i].Effects = slices.Clone(r.Effects)
		for j, e := range d.Routes[i].Effects {
			if e.Forward != nil {
				f := *e.Forward
				d.Routes[i].Effects[j].Forward = &f
			}
		}
	}
	d.MQTT.Brokers = slices.Clone(c.MQTT.Brokers)
	d.MQTT.FormerShareGroups = slices.Clone(c.MQTT.FormerShareGroups)
	d.MQTT.FormerFilters = slices.Clone(c.MQTT.FormerFilters)
	d.MQTT.Feeds = slices.Clone(c.MQTT.Feeds)
	for i, f := range d.MQTT.Feeds {
		d.MQTT.Feeds[i].Brokers = slices.Clone(f.Brokers)
		if f.TLS != nil {
			t := *f.TLS
			d.MQTT.Feeds[i].TLS = &t
		}
	}
	d.HTTP.Tokens = slices.Clone(c.HTTP.Tokens)
	if o := c.Outputs.MQTT; o != nil {
		m := *o
		m.Brokers = slices.Clone(o.Brokers)
		d.Outputs.MQTT = &m
	}
	if o := c.Outputs.Webhook; o != nil {
		w := *o
		d.Outputs.Webhook = &w
	}
	if o := c.Outputs.NATS; o != nil {
		n := *o
		d.Outputs.NATS = &n
	}
	d.JetStream = c.JetStream.clone()
	d.Audit.Sinks = slices.Clone(c.Audit.Sinks)
	for i, s := range d.Audit.Sinks {
		d.Audit.Sinks[i].Headers = maps.Clone(s.Headers)
	}
	return &d
}

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactTemplateURL hides the password of a URL template's user
// information, or the whole of it when it has no password (a token given as
// the user), and leaves the rest as written: a template's {field} in the
// path would come back escaped from url.URL.
func redactTemplateURL(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	auth := s[i+3:]
	if end := strings.IndexAny(auth, "/?#"); end >= 0 {
		auth = auth[:end]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return s
	}
	user, _, hasPass := strings.Cut(auth[:at], ":")
	if !hasPass {
		return s[:i+3] + redacted + s[i+3+at:]
	}
	return s[:i+3] + user + ":" + redacted + s[i+3+at:]
}

// shownURL is a URL as a problem shows it: the password of its user
// information hidden, or the whole of it when it has no password (a token
// given as the user), whether or not the rest of it parses.
func shownURL(s string) string {
	if !strings.Contains(s, "://") {
		return redactBroker(s)
	}
	return redactTemplateURL(s)
}

// redactNATSURL hides the credentials of each URL of a comma-separated
// list of NATS servers: a password, or a user without one, which NATS
// takes for a token.
func redactNATSURL(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		switch {
		// Unparsable, or credentials without a scheme, which the parser
		// does not take for user information ("user:pw@host" reads as
		// scheme user).
		case err != nil || (u.User == nil && strings.Contains(p, "@")):
			parts[i] = redactBroker(p)
		case u.User == nil:
		case hasPassword(u.User):
			parts[i] = u.Redacted()
		default:
			u.User = url.User(redacted)
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

func hasPassword(u *url.Userinfo) bool {
	_, ok := u.Password()
	return ok
}

// redactURL hides the password of a URL or of a key=value connection string.
func redactURL(s string) string {
	if s == "" {
		return s
	}
	if !strings.Contains(s, "://") {
		return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
	}
	u, err := url.Parse(s)
	if err != nil {
		return redactBroker(s)
	}
	return u.Redacted()
}
