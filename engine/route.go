package engine

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Route is one configured route: which messages it takes (an MQTT topic
// filter) and which fields form their identity and effects. Paths are dotted
// payload paths ("a.b") or topic levels ("topic[1]").
type Route struct {
	Name     string
	Topic    string
	Source   []string
	Sequence string // optional; a sequenced route
	Epoch    string // optional, with Sequence
	ID       string // optional; an id route when Sequence is empty
	Effects  []EffectSpec
	// Kind is how payloads are read: KindJSON (the default, "") or the
	// Kind of one of Options.Kinds (such as package sparkplug's, whose
	// source, sequence and epoch are implied).
	Kind string
}

// EffectSpec is one effect of an applied message, of one of three kinds:
// a projection (an entity template and the fields each operation reads,
// each map field -> path), a sql statement (SQL with Args: paths or
// @key, @route, @topic, @sequence, @epoch), or a forward through the
// outbox (Forward).
type EffectSpec struct {
	Entity  string
	Add     map[string]string
	Set     map[string]string
	Max     map[string]string
	Min     map[string]string
	SQL     string
	Args    []string
	Forward *ForwardSpec
}

// path is a compiled field reference.
type path struct {
	text  string
	topic int      // topic level, or -1 for a payload path
	segs  []string // payload path segments
	slot  int      // index among the route's payload paths; -1 for topic levels
}

// op is one effect operation on one field.
type op struct {
	kind  opKind
	field string
	src   int // index into route.paths
}

type opKind uint8

const (
	opAdd opKind = iota
	opSet
	opMax
	opMin
)

func (k opKind) String() string { return [...]string{"add", "set", "max", "min"}[k] }

// tmplPart is a literal or a path reference of an entity template.
type tmplPart struct {
	lit string
	src int // index into route.paths, -1 for a literal
}

// effect is a compiled effect: a projection (entity, ops), or sql, or fwd.
type effect struct {
	entity []tmplPart
	ops    []op
	sql    *sqlEffect
	fwd    *forwardEffect
}

// route is a compiled Route.
type route struct {
	Route
	filter   []string
	paths    []path     // every distinct path the route reads
	payload  [][]string // payload paths, in slot order, for one-pass extraction
	kind     RouteKind
	reader   RouteReader
	forwards int // forward effects
	sqls     int // sql effects
	effects  []effect
	numeric  []bool    // path i feeds add/max/min: must be a number when present
	slots    []int     // payload slot -> path index, built once after compile
	trie     *pathNode // the payload paths, for one-pass extraction
}

// compileRoute compiles r with the reader its kind gives (kinds by name);
// shared says the store is a consumer group's.
func compileRoute(r Route, kinds map[string]RouteKind, shared bool) (*route, error) {
	c := &route{Route: r}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: route %q: %s", ErrConfig, r.Name, fmt.Sprintf(format, a...))
	}
	if r.Name == "" {
		return nil, fmt.Errorf("%w: a route has no name", ErrConfig)
	}
	if len(r.Name) > maxRouteNameBytes {
		return nil, fmt.Errorf("%w: a route's name is %d bytes, over %d", ErrConfig, len(r.Name), maxRouteNameBytes)
	}
	if err := checkFilter(r.Topic); err != nil {
		return nil, bad("topic: %v", err)
	}
	c.filter = strings.Split(r.Topic, "/")
	name := r.Kind
	if name == "" {
		name = KindJSON
	}
	kind, ok := kinds[name]
	if !ok {
		return nil, bad("kind %q is not %s", r.Kind, strings.Join(slices.Sorted(maps.Keys(kinds)), " or "))
	}
	c.kind = kind
	reader, err := kind.Compile(r, &RoutePaths{c: c}, shared)
	if err != nil {
		return nil, bad("%v", err)
	}
	c.reader = reader
	if err := c.compileEffects(r, bad); err != nil {
		return nil, err
	}
	return c, nil
}

// RoutePaths is a route's table of the paths it reads, as its kind
// compiles the route.
type RoutePaths struct{ c *route }

// Ref returns the index of path p among the route's paths, adding it (with
// the kind's ParsePath) the first time: the index of its value in a
// Delivery.
func (p *RoutePaths) Ref(path string) (int, error) { return p.c.ref(path) }

func (c *route) compileEffects(r Route, bad func(string, ...any) error) error {
	for i, e := range r.Effects {
		ce, err := c.compileEffect(e)
		if err != nil {
			return bad("effects[%d]: %v", i, err)
		}
		c.effects = append(c.effects, ce)
	}
	c.slotIndex()
	c.trie = newPathTrie(c.payload)
	return nil
}

func (c *route) compileEffect(e EffectSpec) (effect, error) {
	var ce effect
	kinds := 0
	for _, set := range []bool{e.Entity != "" || len(e.Add)+len(e.Set)+len(e.Max)+len(e.Min) > 0, e.SQL != "" || e.Args != nil, e.Forward != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return ce, fmt.Errorf("an effect is one of an entity projection, a sql statement, a forward")
	}
	switch {
	case e.SQL != "" || e.Args != nil:
		s, err := c.compileSQL(e)
		ce.sql = s
		c.sqls++
		return ce, err
	case e.Forward != nil:
		f, err := c.compileForward(*e.Forward)
		if err != nil {
			return ce, err
		}
		if c.forwards == maxForwards {
			return ce, fmt.Errorf("forward: more than %d forwards on one route", maxForwards)
		}
		f.index = c.forwards
		c.forwards++
		ce.fwd = f
		return ce, nil
	}
	parts, err := c.template(e.Entity)
	if err != nil {
		return ce, err
	}
	// A name without a placeholder is bounded here, as a rendered one is
	// when decoded: it is a store key.
	if len(parts) == 1 && parts[0].src < 0 && len(parts[0].lit) > maxIdentityBytes {
		return ce, fmt.Errorf("entity: the name is %d bytes, over %d", len(parts[0].lit), maxIdentityBytes)
	}
	ce.entity = parts
	for k, m := range []map[string]string{e.Add, e.Set, e.Max, e.Min} {
		for _, field := range sortedKeys(m) {
			if field == "" {
				return ce, fmt.Errorf("empty field name")
			}
			i, err := c.ref(m[field])
			if err != nil {
				return ce, fmt.Errorf("%s.%s: %v", opKind(k), field, err)
			}
			if opKind(k) != opSet {
				c.numeric[i] = true
			}
			ce.ops = append(ce.ops, op{kind: opKind(k), field: field, src: i})
		}
	}
	if len(ce.ops) == 0 {
		return ce, fmt.Errorf("no add, set, max or min field")
	}
	return ce, nil
}

func (c *route) template(t string) ([]tmplPart, error) {
	return c.templateWith("entity", t, func(string) (int, bool) { return 0, false })
}

// templateWith compiles a template; special names a placeholder that is
// not a path, and its src.
func (c *route) templateWith(label, t string, special func(string) (int, bool)) ([]tmplPart, error) {
	if t == "" {
		return nil, fmt.Errorf("%s: empty template", label)
	}
	var parts []tmplPart
	for t != "" {
		open := strings.IndexByte(t, '{')
		if close := strings.IndexByte(t, '}'); close >= 0 && (open < 0 || close < open) {
			return nil, fmt.Errorf("%s: unbalanced '}'", label)
		}
		if open < 0 {
			parts = append(parts, tmplPart{lit: t, src: -1})
			break
		}
		if open > 0 {
			parts = append(parts, tmplPart{lit: t[:open], src: -1})
		}
		end := strings.IndexByte(t[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("%s: unbalanced '{'", label)
		}
		name := t[open+1 : open+end]
		if i, ok := special(name); ok {
			parts = append(parts, tmplPart{src: i})
			t = t[open+end+1:]
			continue
		}
		i, err := c.ref(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", label, err)
		}
		parts = append(parts, tmplPart{src: i})
		t = t[open+end+1:]
	}
	return parts, nil
}

// ref returns the index of path p among the route's paths, adding it once.
func (c *route) ref(p string) (int, error) {
	for i := range c.paths {
		if c.paths[i].text == p {
			return i, nil
		}
	}
	cp, err := c.parse(p)
	if err != nil {
		return 0, err
	}
	if cp.topic < 0 {
		cp.slot = len(c.payload)
		c.payload = append(c.payload, cp.segs)
	}
	c.paths = append(c.paths, cp)
	c.numeric = append(c.numeric, false)
	return len(c.paths) - 1, nil
}

// parse parses a path: a topic level, "topic[N]", or one the route's kind
// reads.
func (c *route) parse(p string) (path, error) {
	if rest, ok := strings.CutPrefix(p, "topic["); ok {
		n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		if !strings.HasSuffix(rest, "]") || err != nil || n < 0 {
			return path{}, fmt.Errorf("bad topic level reference %q", p)
		}
		return path{text: p, topic: n, slot: -1}, nil
	}
	segs, err := c.kind.ParsePath(p)
	if err != nil {
		return path{}, err
	}
	return path{text: p, topic: -1, segs: segs}, nil
}

func checkFilter(f string) error {
	if f == "" {
		return fmt.Errorf("empty filter")
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return fmt.Errorf("%q: '#' must be the whole last level", f)
		}
		if strings.Contains(l, "+") && l != "+" {
			return fmt.Errorf("%q: '+' must be a whole level", f)
		}
	}
	return nil
}

// match reports whether topic matches the route's filter (MQTT rules; a
// filter starting with a wildcard does not match topics starting with '$').
func (c *route) match(topic string) bool {
	if len(topic) > 0 && topic[0] == '$' && (c.filter[0] == "+" || c.filter[0] == "#") {
		return false
	}
	for i, f := range c.filter {
		if f == "#" {
			return true
		}
		level, rest, more := strings.Cut(topic, "/")
		if f != "+" && f != level {
			return false
		}
		if !more {
			return i == len(c.filter)-1 || (i == len(c.filter)-2 && c.filter[i+1] == "#")
		}
		topic = rest
	}
	return false
}
