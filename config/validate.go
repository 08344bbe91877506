package config

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Validate checks the configuration as it stands (call SetDefaults first for
// zero fields to take their defaults; Load and Parse do both). It returns nil
// or a *ValidationError listing every problem.
func (c *Config) Validate() error {
	ps := &problems{}
	c.check(ps)
	return ps.err("")
}

// ValidateRun is Validate plus what replayguard run needs on top: a fixed
// MQTT client id and at least one route. Commands that do not consume from
// MQTT (ingest, state, audit, ...) need only Validate. Its problems name no
// line: LoadRun and ParseRun check the same with the file's settings and
// give each problem its line.
func (c *Config) ValidateRun() error {
	ps := &problems{}
	c.check(ps)
	c.checkRun(ps)
	return ps.err("")
}

func (c *Config) check(ps *problems) {
	c.Store.check(ps, field{}.dot("store"))
	c.Window.check(ps, field{}.dot("window"))
	c.Limits.check(ps, field{}.dot("limits"))
	checkRoutes(ps, c.Routes)
	c.checkSQLStore(ps)
	c.checkJournal(ps)
	c.MQTT.check(ps, field{}.dot("mqtt"))
	if c.MQTT.ShareGroup != "" && c.Input != InputJetStream && !c.Store.Shared() {
		ps.add(field{}.dot("mqtt").dot("share_group"), "share_group %q shares the feed among the members of a consumer group, which decide on one shared store; "+
			"on kind %s each member keeps keys of its own, and a copy the broker delivers again to another member (after a failover, a member's loss) is applied again: "+
			"set store.kind postgres or redis, or remove share_group", c.MQTT.ShareGroup, c.Store.Kind)
	}
	c.HTTP.check(ps, field{}.dot("http"))
	c.Audit.check(ps, field{}.dot("audit"), c.Store)
	c.checkOutputs(ps)
	c.checkInput(ps)
}

func (s StoreConfig) check(ps *problems, f field) {
	switch s.Kind {
	case StoreMemory:
	case StoreEmbedded:
		if s.Path == "" {
			ps.add(f.dot("path"), "path is required for kind embedded: name the directory holding the data")
		}
	case StoreRedis, StorePostgres:
		s.checkURL(ps, f)
		s.checkShared(ps, f)
	default:
		ps.add(f.dot("kind"), "kind %q is not one of memory, embedded, redis, postgres", s.Kind)
	}
	if s.Kind != StoreRedis && s.Kind != StorePostgres {
		for _, o := range []struct {
			key string
			set bool
		}{{"member", s.Member != ""}, {"allow_not_durable", s.AllowNotDurable}, {"allow_async_replication", s.AllowAsyncReplication},
			{"journal", s.Journal != (JournalConfig{})}, {"commit_timeout", s.CommitTimeout != 0},
			{"read_timeout", s.ReadTimeout != 0}} {
			if o.set {
				ps.add(f.dot(o.key), "%s is for a shared store (kind redis or postgres), not kind %s", o.key, s.Kind)
			}
		}
	}
	switch {
	case s.CachedRows < 0:
		ps.add(f.dot("cached_rows"), "cached_rows %d is negative", s.CachedRows)
	case s.CachedRows != 0 && s.Kind != StoreEmbedded:
		ps.add(f.dot("cached_rows"), "cached_rows is for kind embedded, not kind %s", s.Kind)
	}
	if s.Schema != "" && s.Kind != StorePostgres {
		ps.add(f.dot("schema"), "schema is for kind postgres, not kind %s", s.Kind)
	}
	if s.Prefix != "" && s.Kind != StoreRedis {
		ps.add(f.dot("prefix"), "prefix is for kind redis, not kind %s", s.Kind)
	}
	if s.WaitReplicas != 0 && s.Kind != StoreRedis {
		ps.add(f.dot("wait_replicas"), "wait_replicas is for kind redis, not kind %s", s.Kind)
	}
}

// schemaName is a PostgreSQL identifier that needs no quoting.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (s StoreConfig) checkShared(ps *problems, f field) {
	if err := CheckMember(s.Member); err != nil {
		ps.add(f.dot("member"), "%v", err)
	}
	if s.Kind == StorePostgres && s.Schema != "" && !schemaName.MatchString(s.Schema) {
		ps.add(f.dot("schema"), "schema %q is not a plain PostgreSQL name: lowercase letters, digits and _, not starting with a digit, at most 63", s.Schema)
	}
	if s.Kind == StoreRedis && s.Prefix != "" {
		if err := CheckPrefix(s.Prefix); err != nil {
			ps.add(f.dot("prefix"), "%v", err)
		}
	}
	if s.WaitReplicas < 0 {
		ps.add(f.dot("wait_replicas"), "wait_replicas %d is negative", s.WaitReplicas)
	}
	if s.CommitTimeout < 0 || (s.CommitTimeout > 0 && s.CommitTimeout < Duration(100*time.Millisecond)) {
		ps.add(f.dot("commit_timeout"), "commit_timeout %v is below 100ms", s.CommitTimeout)
	}
	if s.ReadTimeout < 0 || (s.ReadTimeout > 0 && s.ReadTimeout < Duration(100*time.Millisecond)) {
		ps.add(f.dot("read_timeout"), "read_timeout %v is below 100ms", s.ReadTimeout)
	}
	if s.Journal.Retention < 0 || (s.Journal.Retention > 0 && s.Journal.Retention < Duration(time.Second)) {
		ps.add(f.dot("journal").dot("retention"), "retention %v is below a second", s.Journal.Retention)
	}
}

// checkJournal holds the journal's retention within the key window: a
// delivery decided again from the journal must still find its key, so
// that one already in the store is a duplicate, never applied twice.
func (c *Config) checkJournal(ps *problems) {
	j := c.Store.Journal
	if c.Store.Shared() && j.Path != JournalOff && j.Retention > c.Window.TTL && c.Window.TTL > 0 {
		ps.add(field{}.dot("store").dot("journal").dot("retention"),
			"retention %v is longer than window.ttl %v: a delivery decided again from the journal after its key left the key window could be applied twice; keep it at most window.ttl",
			j.Retention, c.Window.TTL)
	}
}

// CheckMember reports whether id can be a member id: at most 200 bytes of
// UTF-8 without control characters or spaces (it names an audit chain).
func CheckMember(id string) error {
	switch {
	case len(id) > 200:
		return fmt.Errorf("member id is %d bytes, over 200", len(id))
	case !utf8.ValidString(id):
		return fmt.Errorf("member id %q is not valid UTF-8", id)
	case strings.IndexFunc(id, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0:
		return fmt.Errorf("member id %q holds a space or control character", id)
	}
	return nil
}

// CheckPrefix reports whether p is a Redis key prefix with exactly one
// non-empty hash tag, so that a group's keys share one Cluster slot.
func CheckPrefix(p string) error {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return fmt.Errorf("prefix %q has no hash tag: put the group's name in braces, e.g. \"{plant-a}:\", so its keys share one Redis Cluster slot", p)
	}
	end := strings.IndexByte(p[open:], '}')
	switch {
	case end < 0:
		return fmt.Errorf("prefix %q opens a hash tag it never closes", p)
	case end == 1:
		return fmt.Errorf("prefix %q has an empty hash tag {}: Redis would hash the whole key", p)
	case strings.ContainsAny(p[open+end+1:], "{}") || strings.IndexByte(p[:open], '}') >= 0:
		return fmt.Errorf("prefix %q holds more than one hash tag", p)
	}
	return nil
}

func (s StoreConfig) checkURL(ps *problems, f field) {
	f = f.dot("url")
	if s.URL == "" {
		ps.add(f, "url is required for kind %s", s.Kind)
		return
	}
	if s.Kind == StorePostgres && !strings.Contains(s.URL, "://") {
		return // key=value connection string, checked by the driver
	}
	if s.Kind == StoreRedis && strings.HasPrefix(strings.ToLower(s.URL), "redis+sentinel://") {
		return // a list of Sentinels, a host without a port among them, checked by the store
	}
	schemes := map[string][]string{
		StoreRedis:    {"redis", "rediss", "unix", "redis+sentinel"},
		StorePostgres: {"postgres", "postgresql"},
	}[s.Kind]
	u, err := url.Parse(s.URL)
	if err != nil {
		ps.add(f, "url for kind %s cannot be parsed", s.Kind) // never echo: it may hold a password
		return
	}
	for _, sc := range schemes {
		if u.Scheme == sc {
			return
		}
	}
	ps.add(f, "url scheme %q does not fit kind %s: want %s://", u.Scheme, s.Kind, strings.Join(schemes, ":// or "))
}

func (w WindowConfig) check(ps *problems, f field) {
	if w.TTL <= 0 {
		ps.add(f.dot("ttl"), "ttl must be positive")
	}
	if w.MaxEntries < 1 {
		ps.add(f.dot("max_entries"), "max_entries must be at least 1, got %d", w.MaxEntries)
	}
	if s := w.SequenceSpan; s < 64 || s > 1<<20 || s%64 != 0 {
		ps.add(f.dot("sequence_span"), "sequence_span must be a multiple of 64 from 64 to 1048576, got %d", s)
	}
	if w.KeepEpochs < 1 || w.KeepEpochs > MaxKeepEpochs {
		ps.add(f.dot("keep_epochs"), "keep_epochs must be from 1 to %d, got %d", MaxKeepEpochs, w.KeepEpochs)
	}
}

// maxMQTTPacket is the largest packet MQTT can carry (268435455 bytes).
const maxMQTTPacket = 1<<28 - 1

func (l LimitsConfig) check(ps *problems, f field) {
	if l.MaxPayload <= 0 || l.MaxPayload > maxMQTTPacket {
		ps.add(f.dot("max_payload"), "max_payload must be from 1 byte to %d bytes (the largest MQTT packet), got %d", maxMQTTPacket, int64(l.MaxPayload))
	}
}

// routeName is a route's name: at most 64 bytes, as it is part of every
// source's identity in the store (see the engine's maxSourceBytes).
var routeName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func checkRoutes(ps *problems, routes []Route) {
	seen := map[string]int{}
	for i, r := range routes {
		f := field{}.dot("routes").index(i)
		if r.Name != "" {
			f.label += " (" + r.Name + ")"
		}
		switch j, dup := seen[r.Name]; {
		case r.Name == "":
			ps.add(f.dot("name"), "name is empty: every route needs a unique name")
		case !routeName.MatchString(r.Name):
			ps.add(f.dot("name"), "name %q may hold only letters, digits, '_', '.' and '-' (at most 64)", r.Name)
		case dup:
			ps.add(f.dot("name"), "name %q is already used by routes[%d]", r.Name, j)
		default:
			seen[r.Name] = i
		}
		r.check(ps, f)
	}
}

func (r Route) check(ps *problems, f field) {
	topicOK := r.checkTopic(ps, f.dot("topic"))
	if !topicOK {
		r.Topic = "#" // check topic[N] paths without level bounds
	}
	switch r.Kind {
	case "", RouteJSON:
		r.checkIdentity(ps, f)
	case RouteSparkplug:
		r.checkSparkplug(ps, f)
	default:
		ps.add(f.dot("kind"), "kind %q is not json or sparkplug", r.Kind)
	}
	if r.QoS != nil {
		switch q := *r.QoS; {
		case q == 0:
			ps.add(f.dot("qos"), "qos 0 is refused: exactly-once needs acknowledged delivery; use 1 or 2")
		case q != 1 && q != 2:
			ps.add(f.dot("qos"), "qos must be 1 or 2, got %d", q)
		}
	}
	for j, e := range r.Effects {
		e.check(ps, f.dot("effects").index(j), r)
	}
	r.checkSharedFields(ps, f)
}

func (r Route) checkTopic(ps *problems, f field) bool {
	if r.Topic == "" {
		ps.add(f, "topic is empty: set an MQTT topic filter, like plant/+/energy")
		return false
	}
	if strings.HasPrefix(r.Topic, "$share/") {
		ps.add(f, "topic %q starts with $share/: write the plain filter and set mqtt.share_group", r.Topic)
		return false
	}
	if err := ValidateTopicFilter(r.Topic); err != nil {
		ps.add(f, "%v", err)
		return false
	}
	return true
}

func (r Route) checkIdentity(ps *problems, f field) {
	if len(r.Source) == 0 {
		ps.add(f.dot("source"), "source is empty: list the payload paths or topic[N] levels that identify the producer, like [agency, source_id]")
	}
	dups := map[string]bool{}
	for i, s := range r.Source {
		if checkPath(ps, f.dot("source").index(i), s, r.Topic) && dups[s] {
			ps.add(f.dot("source").index(i), "%q is listed twice", s)
		}
		dups[s] = true
	}
	// A sequence or id that could not be decoded was reported as such, and
	// is empty here: it is not also missing.
	badSequence, badID := ps.reported(f.dot("sequence")), ps.reported(f.dot("id"))
	switch {
	case r.Sequence == "" && r.ID == "" && !badSequence && !badID:
		ps.add(f, "neither sequence nor id is set: a route needs one to build an idempotency key")
	case r.Sequence != "" && r.ID != "":
		ps.add(f, "both sequence and id are set: the idempotency key would be ambiguous; "+
			"drop id to deduplicate by (source, epoch, sequence), or drop sequence to deduplicate by id")
	}
	if r.Epoch != "" && r.Sequence == "" && !badSequence {
		ps.add(f.dot("epoch"), "epoch is set without sequence: an epoch only orders sequences; drop epoch or set sequence")
	}
	for _, p := range []struct{ name, path string }{{"sequence", r.Sequence}, {"epoch", r.Epoch}, {"id", r.ID}} {
		if p.path != "" {
			checkPath(ps, f.dot(p.name), p.path, r.Topic)
		}
	}
}

// topicLevel reports whether p, a valid path, is a topic[N] level: text,
// never a number.
func topicLevel(p string) bool {
	parsed, err := ParsePath(p)
	return err == nil && parsed.Topic
}

// checkPath reports p if it is not a valid path for a route with topic filter
// filter, and returns whether it is valid.
func checkPath(ps *problems, f field, p, filter string) bool {
	parsed, err := ParsePath(p)
	if err != nil {
		ps.add(f, "%v", err)
		return false
	}
	if msg := levelProblem(parsed, filter); msg != "" {
		ps.add(f, "%s %s", parsed, msg)
		return false
	}
	return true
}

// levelProblem says why a topic[N] path cannot match filter ("is out of
// range: ..."), or returns "".
func levelProblem(p Path, filter string) string {
	n, open := filterLevels(filter)
	if !p.Topic || open || p.Level < n {
		return ""
	}
	return fmt.Sprintf("is out of range: topic %q has %d levels, numbered from 0 (topic[0] to topic[%d])", filter, n, n-1)
}

func (e Effect) check(ps *problems, f field, r Route) {
	projection := e.Entity != "" || len(e.Add)+len(e.Set)+len(e.Max)+len(e.Min) > 0
	kinds := 0
	for _, set := range []bool{projection, e.SQL != "" || len(e.Args) > 0, e.Forward != nil} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		ps.add(f, "an effect is one of entity (with add, set, max, min), sql (with args) or forward: write each as its own list item")
		return
	case e.SQL != "" || len(e.Args) > 0:
		e.checkSQL(ps, f, r)
		return
	case e.Forward != nil:
		e.Forward.check(ps, f.dot("forward"), r)
		return
	}
	e.checkEntity(ps, f.dot("entity"), r)
	owner := map[string]string{}
	count := 0
	for _, op := range e.ops() {
		for _, name := range slices.Sorted(maps.Keys(op.fields)) {
			count++
			ff := f.dot(op.name).dot(name)
			if strings.TrimSpace(name) == "" {
				ff = f.dot(op.name)
				ps.add(ff, "a field name is empty")
			} else if prev, ok := owner[name]; ok {
				ps.add(ff, "field %q is already set by %s in this effect: a field takes one operation", name, prev)
			}
			owner[name] = op.name
			if op.fields[name] == "" {
				ps.add(ff, "the payload path is empty")
				continue
			}
			if valid := checkRoutePath(ps, ff, op.fields[name], r); valid && op.name != "set" && topicLevel(op.fields[name]) {
				ps.add(ff, "%q is a topic level, which is text, and %s takes a JSON number: every message with that level would be malformed; "+
					"name a payload field holding the number, or use set to keep the level as text", op.fields[name], op.name)
			}
		}
	}
	if count == 0 {
		ps.add(f, "effect has no fields: set at least one of add, set, max, min, like add: {kwh: kwh}")
	}
}

func (e Effect) checkEntity(ps *problems, f field, r Route) {
	if e.Entity == "" {
		ps.add(f, "entity is empty: name the entity, like \"meter/{topic[1]}\"")
		return
	}
	t, err := ParseTemplate(e.Entity)
	if err != nil {
		ps.add(f, "%v", err)
		return
	}
	for _, p := range t.Paths() {
		if msg := levelProblem(p, r.Topic); msg != "" {
			ps.add(f, "placeholder {%s} %s", p, msg)
		} else if r.Kind == RouteSparkplug && !p.Topic {
			checkSparkplugPath(ps, f, p.String(), r.Topic)
		}
	}
}

// checkRoutePath reports p unless route r can read it: a path of its
// kind (checkSparkplugPath for a sparkplug route), or topic[N].
func checkRoutePath(ps *problems, f field, p string, r Route) bool {
	if r.Kind == RouteSparkplug {
		return checkSparkplugPath(ps, f, p, r.Topic)
	}
	return checkPath(ps, f, p, r.Topic)
}
