package engine

import (
	"fmt"
	"strings"
	"time"
)

// KindJSON is the built-in route kind, the default: a JSON payload whose
// fields are read by dotted path.
const KindJSON = "json"

// RouteKind reads the deliveries of the routes of one kind (Route.Kind),
// the way an image format or a database/sql driver plugs in: json is built
// in, Options.Kinds adds others (package sparkplug has Eclipse Sparkplug
// B). A kind turns a delivery into its identity and content; the engine
// decides every kind with the same code. Its methods, and those of the
// readers it returns, must be safe for concurrent use: Decode runs in
// Prepare, on the source's goroutines.
type RouteKind interface {
	// Kind is the Route.Kind value it reads.
	Kind() string
	// ParsePath returns the segments of a path a route of this kind reads
	// from its payloads. A "topic[N]" path never reaches it: the engine
	// reads topic levels.
	ParsePath(p string) ([]string, error)
	// Compile checks r, a route of this kind, adds the paths its identity
	// reads to paths (its effects' are added after), and returns the
	// reader of its deliveries. shared says the store is a consumer
	// group's: a kind that cannot run there refuses the route. An error
	// says what is wrong with r; New adds the route's name.
	Compile(r Route, paths *RoutePaths, shared bool) (RouteReader, error)
}

// RouteReader reads the deliveries of one route.
type RouteReader interface {
	// Decode is the stateless part of reading a delivery: it sets d's
	// source. A reader whose deliveries carry their whole identity also
	// sets their sequence or id, epoch, values, key and digest, and
	// returns a nil Placer; one whose identity depends on the source's
	// committed state returns the Placer that gives it at decide time.
	// An error is the delivery's malformed reason. Neither d nor m may be
	// kept, and m must not be changed.
	Decode(d *Delivery, m *Message) (Placer, error)
}

// TopicSourcer is a RouteReader whose deliveries' source the topic alone
// names (a Sparkplug edge: its group and node): a delivery found malformed
// before or while its payload was read is recorded under it.
type TopicSourcer interface {
	RouteReader
	// TopicSource returns the source topic names, or nil and why it
	// names none.
	TopicSource(topic string) (source []string, why string)
}

// Placer gives one delivery its identity against its source's committed
// state, at decide time: Place and Applied are called on the engine's
// decision goroutine, in decision order, never concurrently. The Placement
// they are given is valid for the call alone: it is not kept.
type Placer interface {
	// Place sets d's epoch and sequence (or leaves it unsequenced), key,
	// digest and values against p's source. A non-empty hold quarantines
	// the delivery with that reason; an error makes it malformed. Nothing
	// is ever guessed: what cannot be placed is held.
	Place(d *Delivery, p *Placement) (hold string, err error)
	// Applied updates the source's state after d was applied, and
	// reports whether it changed it (the engine then commits the source).
	Applied(d *Delivery, p *Placement) bool
}

// HeldPlacer is a Placer whose kind keeps, in its source's state, what it
// must know of the deliveries it held: Held is called, in decision order,
// after d was held (quarantined, malformed or a conflict, whether its
// Place held it or the engine did), and reports whether it changed the
// state its kind keeps in p's source window (the engine then commits the
// source with the decision). It changes nothing else.
type HeldPlacer interface {
	Placer
	Held(d *Delivery, p *Placement) bool
}

// LoggedPlacer is a Placer whose released messages the audit log may
// prove applied once their keys have left the key window and their window
// no longer tells (a Sparkplug message, whose key follows from where it is
// placed): Engine.Release reads the log the store keeps for the effective
// records of the delivery's route and source at a sequence MayBeLogged
// accepts, and Placement.Logged hands them to Place. A Place that finds
// the delivery's own among them places it there, and the engine decides it
// a duplicate the log proves.
type LoggedPlacer interface {
	Placer
	// Loggable reports whether the log may prove the delivery applied
	// at all (a Sparkplug NBIRTH or NDEATH it never does): false spares
	// the read.
	Loggable() bool
	// MayBeLogged reports whether an effective record at sequence seq
	// may be the delivery's own.
	MayBeLogged(seq int64) bool
}

// LoggedApplication is an effective audit record a released delivery may
// be the message of (LoggedPlacer).
type LoggedApplication struct {
	Epoch       string
	Sequence    int64
	Key, Digest Hash
	Position    uint64
	Member      string // the chain that holds it, on a shared store
}

// RouteName is the name of the delivery's route.
func (d *Delivery) RouteName() string { return d.route.Name }

// SetSource sets the source, the parts of its window's identity.
func (d *Delivery) SetSource(parts ...string) {
	d.source = append(d.srcBuf[:0], parts...)
}

// Source is the delivery's source.
func (d *Delivery) Source() []string { return d.source }

// SetPlace places the delivery: an integer epoch (text, and its value,
// which orders epochs) and a sequence in it, -1 for none.
func (d *Delivery) SetPlace(epoch string, value int64, seq int64) {
	d.epoch, d.epochNum, d.epochInt, d.seq = epoch, true, value, seq
}

// SetOlderEpoch says the integer epoch SetPlace gave is new, though older
// than the source's current one: it began before the current epoch and was
// decided after it (a Sparkplug rebirth whose NBIRTH another member
// decided late). Its window is opened among the kept ones, in order of
// value, when it falls between two of them: windows leave oldest first, so
// none of it was ever dropped. Older than every kept one, it is held
// (old_epoch), as without.
func (d *Delivery) SetOlderEpoch() { d.older = true }

// SetSeen says the delivery was applied before, as the state its kind
// keeps in its source records (a Sparkplug session keeps the content of
// the NDEATH that ended it), though the key window may no longer hold its
// key (window.ttl, window.max_entries): it is decided a duplicate. A kind
// calls it only on such a proof, never for a likeness.
func (d *Delivery) SetSeen() { d.seen = true }

// SetKey sets the delivery's idempotency key and content digest.
func (d *Delivery) SetKey(key, digest Hash) { d.key, d.digest = key, digest }

// SetValues reads each path the route's effects read from read (the value
// of a path's segments; topic levels are the engine's), checks them and
// renders the entity names and forward targets: the effects' inputs.
func (p *Placement) SetValues(read func(segs []string) Value) error {
	return p.SetReadings(func(segs []string) (Value, []Reading) { return read(segs), nil })
}

// SetReadings is SetValues for a kind whose messages may carry a path more
// than once, or flag a value historical: not the path's current value but
// one acquired before and sent late (a Sparkplug payload that holds one
// metric several times, some flagged is_historical, as an edge forwarding
// what it stored during an outage sends it). read returns a path's value
// and, when it has several or a historical one, all of them in the
// message's order (nil otherwise). An add takes every one of them, each
// once, historical or not, and a max or a min the highest or the lowest.
// A set takes the last that is not historical; when all are, it sets
// nothing, as for an absent value, and the decision's reason says so. A
// sql effect runs once for each value of the path its arguments read, in
// order, each run taking one of them (paths with several values each, as
// many, are taken together: value j of each in run j; a message whose
// paths of one statement carry different numbers of them is malformed),
// and the reason says how many times it ran. Everything else (an entity
// name, a forward's target, a sql argument of a path read once) reads the
// value read returns. Each path's readings are copied before the
// next path is read: a kind may reuse their slice.
func (p *Placement) SetReadings(read func(segs []string) (Value, []Reading)) error {
	d := p.d
	r := d.route
	d.clearVals()
	for i, path := range r.paths {
		var v value // absent, also when placed again
		if path.topic < 0 {
			rv, rs := read(path.segs)
			v = rv.v
			if len(rs) > 0 {
				d.keepReadings(i, rs)
			}
		} else if lv, ok := topicLevel(p.topic, path.topic); ok {
			v = value{kind: vString, text: lv}
		}
		d.vals[i] = v
	}
	for i, v := range d.vals {
		if err := r.checkValue(i, v); err != nil {
			return err
		}
	}
	if d.more != nil {
		for _, rd := range *d.more {
			if err := r.checkValue(rd.path, rd.v); err != nil {
				return err
			}
		}
		if err := d.checkRuns(); err != nil {
			return err
		}
	}
	return d.entityNames(p.topic)
}

// checkValue refuses v as the value of path i: an object or array, or
// anything but a number for a path an add, max or min reads.
func (c *route) checkValue(i int, v value) error {
	name := c.paths[i].text
	switch {
	case v.kind == vComposite:
		return malformed("%s: a %s value is not a field value", name, v.text)
	case c.numeric[i] && v.kind != vAbsent && v.kind != vNumber:
		return malformed("effect field %s: want a number, got %s", name, kindNames[v.kind])
	}
	return nil
}

// reading is one of the values a message carries for one path
// (SetReadings).
type reading struct {
	path int // index into route.paths
	v    value
	hist bool // Reading.Historical
}

// keepReadings keeps rs, the values of path i, in d.
func (d *Delivery) keepReadings(i int, rs []Reading) {
	if d.more == nil {
		d.more = new([]reading)
	}
	for _, r := range rs {
		*d.more = append(*d.more, reading{path: i, v: r.Value.v, hist: r.Historical})
	}
}

// topicLevel returns level n of topic.
func topicLevel(topic string, n int) (string, bool) {
	for i := 0; ; i++ {
		level, rest, more := strings.Cut(topic, "/")
		if i == n {
			return level, true
		}
		if !more {
			return "", false
		}
		topic = rest
	}
}

// Value is the value of a path a route kind reads; the zero Value is an
// absent one (the effect reading it does nothing for that field).
type Value struct{ v value }

// Reading is one of the values a message carries for one path
// (SetReadings). Historical says it is not the path's current value but
// one acquired before and sent late (a Sparkplug metric flagged
// is_historical: store and forward after an outage).
type Reading struct {
	Value      Value
	Historical bool
}

// Text is the value's canonical text: a number's exact decimal, a string,
// "true", "false", "null", or an opaque value's type name.
func (v Value) Text() string { return v.v.text }

// Code is the value's kind as a number fixed for digests: 0 absent,
// 1 string, 2 number, 3 boolean, 4 null, 5 opaque.
func (v Value) Code() byte { return byte(v.v.kind) }

// NumberValue is a number, from its decimal text; an error when it is not
// one the engine can hold exactly.
func NumberValue(text string) (Value, error) {
	t, integer, err := canonicalNumber(text)
	if err != nil {
		return Value{}, err
	}
	return Value{v: value{kind: vNumber, text: t, integer: integer}}, nil
}

// StringValue is a string.
func StringValue(s string) Value { return Value{v: value{kind: vString, text: s}} }

// BoolValue is a boolean.
func BoolValue(b bool) Value {
	if b {
		return Value{v: value{kind: vBool, text: "true"}}
	}
	return Value{v: value{kind: vBool, text: "false"}}
}

// NullValue is a null.
func NullValue() Value { return Value{v: value{kind: vNull, text: "null"}} }

// OpaqueValue is a value no effect may read (a dataset, an array), named by
// its type: an effect reading it makes the delivery malformed.
func OpaqueValue(typeName string) Value { return Value{v: value{kind: vComposite, text: typeName}} }

// placement is the Placement for one call of d's Placer, in d's own
// storage (one allocation per message, the Delivery's).
func (d *Delivery) placement(e *Engine, topic string, now time.Time) *Placement {
	d.plBuf = Placement{e: e, d: d, topic: topic, now: now}
	return &d.plBuf
}

// Placement is what a Placer sees of the engine when it places a delivery:
// the source's committed window and the key window.
type Placement struct {
	e         *Engine
	d         *Delivery
	topic     string
	now       time.Time
	src       *SourceState // the source window, once looked up
	looked    bool
	released  bool
	recovered bool
	logged    []LoggedApplication
}

// Released reports whether an operator releases the delivery from
// quarantine, or a member decides again from its journal a delivery it
// applied before its shared store lost the commit: a kind places it where
// what it knows makes one placement the likeliest, even where a delivery
// would be held as ambiguous, the operator (or the first decision) having
// judged it genuine; the window rules decide it then.
func (p *Placement) Released() bool { return p.released }

// Logged is what the audit log records applied that a released delivery
// of a LoggedPlacer's may be (see LoggedPlacer); nil for any other.
func (p *Placement) Logged() []LoggedApplication { return p.logged }

// Recovered reports whether the delivery is one this member applied
// before its shared store lost the commit, decided again from its
// journal (Released is true then too). Its first decision was made on
// what the store held then: a kind may take a placement another message
// took since (another member going on from what the store kept) as proof
// that the delivery's own lies elsewhere.
func (p *Placement) Recovered() bool { return p.recovered }

// Topic is the delivery's topic.
func (p *Placement) Topic() string { return p.topic }

// Window is the delivery's source window, nil before its first applied
// message. A Placer may change the state its kind keeps there (a
// Sparkplug edge's session, SourceState.Sparkplug) in Applied; nothing
// else.
func (p *Placement) Window() *SourceState {
	if !p.looked {
		p.src, p.looked = p.e.lookupSource(p.d), true
	}
	return p.src
}

// Holds reports whether the key window holds key, applied with digest.
func (p *Placement) Holds(key, digest Hash) bool {
	dg, hit := p.e.keys.lookup(key)
	if !hit && p.e.unread != nil {
		p.e.unread.key(key)
	}
	return hit && dg == digest64(digest)
}

// HoldsKey reports whether the key window holds key, whatever the digest
// it was applied with.
func (p *Placement) HoldsKey(key Hash) bool {
	_, hit := p.e.keys.lookup(key)
	if !hit && p.e.unread != nil {
		p.e.unread.key(key)
	}
	return hit
}

// SequenceSpan is the anti-replay window's span, in sequences.
func (p *Placement) SequenceSpan() int { return p.e.opts.SequenceSpan }

// KeepEpochs is window.keep_epochs: the older epoch windows kept per
// source, beside its current one.
func (p *Placement) KeepEpochs() int { return p.e.opts.KeepEpochs }

// KeyTTL is window.ttl: how long the key window keeps a key at most.
func (p *Placement) KeyTTL() time.Duration { return p.e.ttl }

// Now is the decision's time.
func (p *Placement) Now() time.Time { return p.now }

// KeyNow is the time the key window ages its keys by at this decision: a
// single-owner engine's key clock, which follows the time elapsed and not
// a step of the wall clock; on a shared store whose server's clock is read,
// the group's key clock; else Now.
func (p *Placement) KeyNow() time.Time {
	if p.e.group != nil {
		return time.Unix(0, p.e.keyStamp).UTC()
	}
	if p.e.ages != nil {
		return time.Unix(0, p.e.ages.last).UTC()
	}
	return p.now
}

// KeyCutoff is the oldest a time read from KeyNow may be for the key
// window to hold what was stamped with it still, at this decision: KeyNow
// less KeyTTL, or on a shared store whose server's clock is read, the
// group's key cutoff, earlier than that by the reading's round trip and
// the drift since (groupClock).
func (p *Placement) KeyCutoff() time.Time {
	if p.e.group != nil {
		return time.Unix(0, p.e.keyCutoff).UTC()
	}
	return p.KeyNow().Add(-p.e.ttl)
}

// Position is the audit position the delivery's record takes.
func (p *Placement) Position() uint64 { return p.e.tail.Position + 1 }

// Reasons a route kind gives when it holds a delivery, shared with the
// engine's own.
const (
	ReasonOldEpoch = reasonOldEpoch
)

// MaxIdentityBytes bounds each source part, id, epoch and entity name:
// they become store keys, which must stay small.
const MaxIdentityBytes = maxIdentityBytes

// MaxSourceBytes bounds a source's parts together.
const MaxSourceBytes = maxSourceBytes

// kindsOf returns the route kinds by name: json and opts'.
func kindsOf(opts []RouteKind) (map[string]RouteKind, error) {
	m := map[string]RouteKind{KindJSON: jsonKind{}}
	for _, k := range opts {
		if _, dup := m[k.Kind()]; dup {
			return nil, fmt.Errorf("%w: route kind %q given twice", ErrConfig, k.Kind())
		}
		m[k.Kind()] = k
	}
	return m, nil
}
