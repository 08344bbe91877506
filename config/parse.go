package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load reads the file at path and returns its configuration: interpolated,
// strictly parsed, overridden from the environment, defaulted and validated
// (see Parse). A problem with the contents is a *ValidationError.
func Load(path string) (*Config, error) {
	return load(path, false)
}

// LoadRun is Load for replayguard run and lint: what ValidateRun checks is
// checked with the rest, and its problems are listed with the file's, each
// with the line of its setting (or of the section that lacks it).
func LoadRun(path string) (*Config, error) {
	return load(path, true)
}

func load(path string, run bool) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return parse(data, path, os.LookupEnv, run)
}

// Parse is Load on data already read; name is used in messages. getenv looks
// up variables for interpolation and overrides; nil means an empty
// environment. Parse returns nil and a *ValidationError listing every
// problem, or a valid configuration with defaults set.
func Parse(data []byte, name string, getenv func(string) (string, bool)) (*Config, error) {
	return parse(data, name, getenv, false)
}

// ParseRun is LoadRun on data already read, as Parse is Load.
func ParseRun(data []byte, name string, getenv func(string) (string, bool)) (*Config, error) {
	return parse(data, name, getenv, true)
}

// parse does Parse, and with run ValidateRun's checks too, before problems
// about settings that could not be decoded are dropped.
func parse(data []byte, name string, getenv func(string) (string, bool), run bool) (*Config, error) {
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	text, interpErrs := interpolate(string(data), getenv)
	if len(interpErrs) > 0 {
		ps := &problems{}
		for _, p := range interpErrs {
			ps.addProblem("", p)
		}
		return nil, ps.err(name)
	}
	c := &Config{}
	ps, given, ok := decode(text, c)
	if !ok {
		return nil, ps.err(name)
	}
	decoded := len(ps.list)
	c.normalize()
	if given["http.listen"] && c.HTTP.Listen == "" {
		c.HTTP.Listen = ListenOff
	}
	ps.origin.env = c.applyEnv(getenv)
	if _, written := ps.origin.lines["mqtt.feeds"]; written && c.MQTT.Feeds == nil {
		c.MQTT.Feeds = []MQTTFeed{} // feeds: with nothing after it (a template that expanded to nothing): refused as empty
	}
	c.checkGivenZeros(ps, given)
	c.SetDefaults()
	c.check(ps)
	if run {
		c.checkRun(ps)
	}
	ps.dropAfter(decoded)
	c.origin = ps.origin
	if err := ps.err(name); err != nil {
		// Only when every value was decoded: one that was not is left
		// empty, which checks of the machine would report again.
		var ve *ValidationError
		if errors.As(err, &ve) && decoded == 0 {
			ve.Partial = c
		}
		return nil, err
	}
	return c, nil
}

// decode parses text into c, reporting syntax errors, unknown keys and
// values of the wrong type. ok is false when text is not YAML at all, or
// when a mapping sets a key twice: yaml then leaves the whole mapping out
// (a route, and every route after it moves up a place), so what was
// decoded cannot be checked. given holds the keys set to a non-null value.
func decode(text string, c *Config) (ps *problems, given map[string]bool, ok bool) {
	ps = &problems{}
	var root yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(text))
	err := dec.Decode(&root)
	if err == io.EOF {
		return ps, nil, true // an empty file: every default
	}
	if err == nil && dec.Decode(new(yaml.Node)) != io.EOF {
		err = errors.New("yaml: the file holds more than one YAML document")
	}
	if err != nil {
		ps.addProblem("", syntaxProblem(err))
		return ps, nil, false
	}
	w := newWalker()
	if len(root.Content) == 1 {
		w.node(root.Content[0], configType, field{})
	}
	ps.origin.lines = w.lines
	for _, p := range w.unknown {
		ps.addProblem(p.key, p.Problem)
	}
	strict := yaml.NewDecoder(bytes.NewReader([]byte(text)))
	strict.KnownFields(true)
	var te *yaml.TypeError
	if err := strict.Decode(c); errors.As(err, &te) {
		twice := false
		for _, msg := range te.Errors {
			if p, key, ok := w.typeProblem(msg); ok {
				ps.addProblem(key, p)
			}
			if m := lineMsg.FindStringSubmatch(msg); m != nil && definedTwice.MatchString(m[3]) {
				twice = true
			}
		}
		if twice {
			return ps, nil, false
		}
	} else if err != nil {
		ps.addProblem("", syntaxProblem(err))
		return ps, nil, false
	}
	return ps, w.given, true
}

// lineMsg matches yaml's "line N: message"; the unmarshalers of this
// package add "column N: " so that the setting can be found.
var lineMsg = regexp.MustCompile(`^(?:yaml: )?line (\d+): (?:column (\d+): )?(.*)$`)

func syntaxProblem(err error) Problem {
	m := lineMsg.FindStringSubmatch(err.Error())
	if m == nil {
		return Problem{Message: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	n, _ := strconv.Atoi(m[1])
	return Problem{Message: m[3], Line: n}
}

var (
	notFound     = regexp.MustCompile(`^field .* not found in type `)
	cannot       = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	definedTwice = regexp.MustCompile(`^mapping key (".*") already defined at line (\d+)$`)
)

// typeProblem turns one message of a yaml.TypeError into a problem about the
// setting on its line. Unknown fields the walker reported, with their path
// and the keys that are known, are left out.
func (w *walker) typeProblem(msg string) (Problem, string, bool) {
	m := lineMsg.FindStringSubmatch(msg)
	if m == nil {
		return Problem{Message: msg}, "", true
	}
	line, _ := strconv.Atoi(m[1])
	column, _ := strconv.Atoi(m[2])
	text := m[3]
	if nf := notFound.FindStringSubmatch(text); nf != nil {
		if w.unknownLines[line] {
			return Problem{}, "", false // reported with its path and suggestions
		}
		text = fmt.Sprintf("unknown key %q", nf[1])
	}
	if c := cannot.FindStringSubmatch(text); c != nil {
		key := w.keyAt(line, 0, c[2])
		if v := w.values[key]; v != nil && v.Kind == yaml.ScalarNode && c[2] != "" {
			c[2] = v.Value // yaml cuts long values short
		}
		text = "want " + typeWanted(c[3]) + ", got " + valueGot(c[1], c[2])
		if c[1] == "str" && strings.HasPrefix(c[3], "[]") && c[2] != "" { // "[]" would be a list of none
			text += fmt.Sprintf(" (write [%s] for a list of one)", c[2])
		}
		return Problem{Path: w.labels[key], Message: text, Line: line}, key, true
	}
	if d := definedTwice.FindStringSubmatch(text); d != nil {
		text = "key " + d[1] + " is set twice (first at line " + d[2] + ")"
	}
	key := w.keyAt(line, column, "")
	return Problem{Path: w.labels[key], Message: text, Line: line}, key, true
}

func typeWanted(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map[") || strings.HasPrefix(goType, "config."):
		return "a mapping"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return goType
}

func valueGot(tag, value string) string {
	switch tag {
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "str":
		return strconv.Quote(value)
	}
	return value
}

// givenZero is a setting whose zero value means its default: whether it
// is zero, and the default a zero would take.
type givenZero struct {
	key  string
	zero bool
	def  any
}

// checkGivenZeros refuses zeros written in the file for settings whose zero
// value means "use the default": the default would silently replace them.
// So it does a list of brokers from the environment that names none.
func (c *Config) checkGivenZeros(ps *problems, given map[string]bool) {
	zeros := []givenZero{
		{"window.ttl", c.Window.TTL == 0, DefaultTTL},
		{"window.max_entries", c.Window.MaxEntries == 0, DefaultMaxEntries},
		{"window.sequence_span", c.Window.SequenceSpan == 0, DefaultSequenceSpan},
		{"window.keep_epochs", c.Window.KeepEpochs == 0, DefaultKeepEpochs},
		{"limits.max_payload", c.Limits.MaxPayload == 0, DefaultMaxPayload},
		{"mqtt.keep_alive", c.MQTT.KeepAlive == 0, DefaultKeepAlive},
		{"mqtt.adopt_lost_after", c.MQTT.AdoptLostAfter == 0, DefaultAdoptLostAfter},
		{"mqtt.batch_size", c.MQTT.BatchSize == 0, DefaultBatchSize},
		{"mqtt.batch_linger", c.MQTT.BatchLinger == 0, DefaultBatchLinger},
		{"mqtt.receive_maximum", c.MQTT.ReceiveMaximum == 0, DefaultReceiveMaximum},
		{"outbox.max_entries", c.Outbox.MaxEntries == 0, DefaultOutboxMaxEntries},
		// The shared store's and the webhook's settings take their defaults
		// the same way: a 0 written for them would be replaced unseen.
		{"store.commit_timeout", c.Store.CommitTimeout == 0, DefaultCommitTimeout},
		{"store.read_timeout", c.Store.ReadTimeout == 0, DefaultReadTimeout},
		{"store.journal.retention", c.Store.Journal.Retention == 0, DefaultJournalRetain},
	}
	if c.Store.Kind == StoreEmbedded || c.Store.Kind == "" { // embedded is the default kind
		zeros = append(zeros, givenZero{"store.cached_rows", c.Store.CachedRows == 0, DefaultCachedRows})
	}
	if w := c.Outputs.Webhook; w != nil {
		zeros = append(zeros, []givenZero{
			{"outputs.webhook.timeout", w.Timeout == 0, DefaultWebhookTimeout},
			{"outputs.webhook.max_backoff", w.MaxBackoff == 0, DefaultWebhookBackoff},
		}...)
	}
	if j := c.JetStream; j != nil {
		zeros = append(zeros, []givenZero{
			{"jetstream.batch_size", j.BatchSize == 0, DefaultJetStreamBatch},
			{"jetstream.batch_linger", j.BatchLinger == 0, DefaultBatchLinger},
			{"jetstream.max_ack_pending", j.MaxAckPending == 0, DefaultMaxAckPending},
			{"jetstream.ack_wait", j.AckWait == 0, DefaultAckWait},
		}...)
	}
	zeros = append(zeros, c.givenZerosOfAudit()...)
	if o := c.Outputs.MQTT; o != nil {
		ka := c.MQTT.KeepAlive
		if ka == 0 {
			ka = DefaultKeepAlive
		}
		zeros = append(zeros, givenZero{"outputs.mqtt.keep_alive", o.KeepAlive == 0, fmt.Sprintf("mqtt.keep_alive's, %v", ka)})
	}
	for _, z := range zeros {
		if given[z.key] && z.zero {
			name := z.key[strings.IndexByte(z.key, '.')+1:]
			ps.add(field{z.key, z.key}, "%s is 0: remove it to use the default (%v), or set a positive value", name, z.def)
		}
	}
	if _, set := ps.origin.env["mqtt.brokers"]; set && len(c.MQTT.Brokers) == 0 {
		ps.add(field{"mqtt.brokers", "mqtt.brokers"}, "brokers is empty: list at least one, comma-separated, like tcp://127.0.0.1:1883")
	} else if given["mqtt.brokers"] && len(c.MQTT.Brokers) == 0 && c.Input != InputJetStream {
		// not taken for absent: the default broker, this machine's, is not
		// what a list written empty asks for
		ps.add(field{"mqtt.brokers", "mqtt.brokers"}, "brokers is empty: list at least one, like [tcp://127.0.0.1:1883], or remove it to use that default")
	}
	if given["outputs.mqtt.brokers"] && c.Outputs.MQTT != nil && len(c.Outputs.MQTT.Brokers) == 0 {
		// not taken for absent either: the consumer's brokers, which the
		// output uses without brokers of its own, are not what an empty
		// list asks for
		ps.add(field{"outputs.mqtt.brokers", "outputs.mqtt.brokers"}, "brokers is empty: list at least one, like [tcp://cop:1883], or remove it to publish on the consumer's brokers")
	}
	if given["audit.retention"] && !c.Audit.Retention.Enabled() && !given["audit.retention.max_age"] && !given["audit.retention.max_records"] &&
		!given["audit.retention.interval"] {
		ps.add(field{"audit.retention", "audit.retention"},
			"retention sets no limit, so nothing would leave the store: set max_age or max_records, or remove it")
	}
	if given["mqtt.session_expiry"] && c.MQTT.SessionExpiry == 0 {
		ps.add(field{"mqtt.session_expiry", "mqtt.session_expiry"},
			"session_expiry 0s ends the session at every disconnect, so messages not yet acknowledged would be lost: remove it to use the default (%v), or set a longer one", DefaultSessionExpiry)
	}
}

// normalize makes empty lists and maps nil, as Marshal leaves them out.
func (c *Config) normalize() {
	if len(c.Routes) == 0 {
		c.Routes = nil
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		if len(r.Effects) == 0 {
			r.Effects = nil
		}
		for j := range r.Effects {
			for _, m := range []*map[string]string{&r.Effects[j].Add, &r.Effects[j].Set, &r.Effects[j].Max, &r.Effects[j].Min} {
				if len(*m) == 0 {
					*m = nil
				}
			}
		}
	}
}
