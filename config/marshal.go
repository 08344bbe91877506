package config

import (
	"bytes"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Marshal returns the effective configuration as YAML, every default filled
// in, for replayguard config print. c itself is not changed. Parse reads the
// output back to an equal Config, except that a password in a URL reads back
// as "xxxxx". Secrets never appear: the configuration holds only the names of
// the variables and files that carry them, and a store, broker or webhook URL
// with a password is shown redacted.
func (c *Config) Marshal() ([]byte, error) {
	d := c.clone()
	d.SetDefaults()
	d.Store.URL = redactURL(d.Store.URL)
	for i, b := range d.MQTT.Brokers {
		d.MQTT.Brokers[i] = redactURL(b)
	}
	for _, f := range d.MQTT.Feeds {
		for i, b := range f.Brokers {
			f.Brokers[i] = redactURL(b)
		}
	}
	if o := d.Outputs.MQTT; o != nil {
		for i, b := range o.Brokers {
			o.Brokers[i] = redactURL(b)
		}
	}
	if o := d.Outputs.NATS; o != nil {
		o.URL = redactURL(o.URL)
	}
	if j := d.JetStream; j != nil {
		j.URL = redactURL(j.URL)
	}
	for _, r := range d.Routes {
		for _, e := range r.Effects {
			if e.Forward != nil && e.Forward.Webhook != "" {
				e.Forward.Webhook = redactTemplateURL(e.Forward.Webhook)
			}
		}
	}
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
	return &d
}

var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactURL hides the password of a URL or of a key=value connection string.
// redactTemplateURL hides the password of a URL template's user
// information and leaves the rest as written: a template's {field} in the
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
		return s
	}
	return s[:i+3] + user + ":xxxxx" + s[i+3+at:]
}

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
