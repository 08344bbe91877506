package sparkplug

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/sptopic"
)

// KindSparkplug is the Route.Kind of Sparkplug B routes.
const KindSparkplug = "sparkplug"

// Namespace is the first topic level of every Sparkplug B topic.
const Namespace = sptopic.Namespace

// RouteKind is the engine's route kind for Eclipse Sparkplug B (an
// engine.RouteKind): a route's source is the edge node ([group, edge]),
// its epoch the edge's session (from bdSeq, and its rebirths), its
// sequence seq unwrapped in that epoch, and its paths metrics.<Name>,
// timestamp.<Name>, is_historical.<Name>, timestamp, seq and topic[N]. A
// message's identity depends on the edge's committed session, so it is
// placed at decide time; what cannot be placed is held. The zero value is
// ready; it is safe for concurrent use.
type RouteKind struct{}

var _ engine.RouteKind = RouteKind{}

// Kind returns KindSparkplug.
func (RouteKind) Kind() string { return KindSparkplug }

// ParsePath parses a path of a sparkplug route: metrics.<Name> (a
// metric's value; the name is the whole rest, '.' and '/' included),
// timestamp.<Name> (its own timestamp), is_historical.<Name> (its flag),
// timestamp (the payload's) or seq.
func (RouteKind) ParsePath(p string) ([]string, error) {
	for _, root := range metricPaths {
		if name, ok := strings.CutPrefix(p, root+"."); ok && name != "" {
			return []string{root, name}, nil
		}
	}
	if p == "timestamp" || p == "seq" {
		return []string{p}, nil
	}
	return nil, fmt.Errorf("bad sparkplug path %q: a sparkplug route reads metrics.<Name>, timestamp.<Name>, is_historical.<Name>, timestamp, seq or topic[N]", p)
}

// metricPaths are the first segments of the paths that read a metric,
// named by the rest: its value, its own timestamp, its is_historical flag.
var metricPaths = []string{"metrics", "timestamp", "is_historical"}

// Compile checks what a sparkplug route must and must not set: no
// identity, and a topic filter under Namespace whose type level is a
// wildcard or a type the route decides, never the host applications'
// commands (NCMD, DCMD) or STATE topics, as the configuration's check
// says in the same words.
// It runs on every store: on a shared one, the engine reads an edge's
// session row before the keys and entities its messages imply.
func (RouteKind) Compile(r engine.Route, _ *engine.RoutePaths, _ bool) (engine.RouteReader, error) {
	if len(r.Source) > 0 || r.Sequence != "" || r.Epoch != "" || r.ID != "" {
		return nil, fmt.Errorf("a sparkplug route sets no source, sequence, epoch or id: they are implied " +
			"(source [group, edge], sequence seq, epoch the edge's session from bdSeq)")
	}
	if err := sptopic.CheckFilter(r.Topic); err != nil {
		return nil, err
	}
	return reader{}, nil
}

// reader reads a sparkplug route's deliveries.
type reader struct{}

// Decode is the stateless part of a Sparkplug message's decode: the topic
// and the payload. Its identity, aliases, key and digest depend on the
// edge's session and are placed with it (spMessage.Place).
func (reader) Decode(d *engine.Delivery, m *engine.Message) (engine.Placer, error) {
	sp, err := parseTopic(m.Topic)
	if err != nil {
		return nil, err
	}
	if sp.p, err = decodePayload(m.Payload); err != nil {
		return nil, fmt.Errorf("payload is not a Sparkplug B payload: %v", err)
	}
	if err := sp.checkPayload(); err != nil {
		if !sp.typ.birth() || !sp.p.HasTimestamp {
			return nil, err
		}
		// A birth refused for its content still names its edge and when
		// it was sent: placed, it is malformed, and the edge's session
		// records that it was held (Held), so the data sent after it is
		// held too rather than read with the aliases of the birth before.
		sp.bad = err
	}
	d.SetSource(sp.group, sp.edge)
	return sp, nil
}

// TopicSource is the source of a delivery on topic, its edge's group and
// node, for a message found malformed (engine.TopicSourcer): its payload
// too large to read, or not a Sparkplug B payload. Nil, with why, when the
// topic is not an edge's message topic.
func (reader) TopicSource(topic string) ([]string, string) {
	sp, err := parseTopic(topic)
	if err != nil {
		return nil, err.Error()
	}
	return []string{sp.group, sp.edge}, ""
}

// Sparkplug message types a route decides.
type spType uint8

const (
	spNBirth spType = iota
	spNData
	spNDeath
	spDBirth
	spDData
	spDDeath
)

var spTypeNames = [...]string{"NBIRTH", "NDATA", "NDEATH", "DBIRTH", "DDATA", "DDEATH"}

func (t spType) String() string { return spTypeNames[t] }

func (t spType) device() bool { return t >= spDBirth }

func (t spType) birth() bool { return t == spNBirth || t == spDBirth }

// spMessage is a Sparkplug message after the stateless decode, and what
// the decision resolves on it.
type spMessage struct {
	typ                 spType
	group, edge, device string
	levels              []string // the topic's, in levelBuf
	levelBuf            [5]string
	p                   Payload
	metrics             []spResolved // one per metric of p, in order
	bdSeq               int64        // unwrapped: NBIRTH and NDEATH
	birth               int          // index in the session's births of the birth it belongs to; -1 for a new one
	rebirth             int          // a new NBIRTH: its rebirth number in its session
	newBirth            bool         // a new NBIRTH opens an epoch
	at                  int          // a new NBIRTH older than the current birth: its index among the births
	ended               bool         // a new NBIRTH whose session's NDEATH was applied before it
	death               engine.Hash  // an ended new NBIRTH: that NDEATH's digest, when known
	past                bool         // an NDEATH that is not its unwrapped session's (released, it changes no state)
	logged              bool         // released, placed where the audit log records its content applied (loggedAt)
	seqRaw              int64
	bad                 error       // a birth whose payload was refused: its malformed reason
	highs               []epochHigh // a new NBIRTH: each window's highest sequence before it

	// Its placement: the epoch (text and value), the sequence in it (-1
	// for an NDEATH) and the digest of its resolved content.
	epoch    string
	epochInt int64
	seq      int64
	digest   engine.Hash
}

// epochHigh is an epoch window's highest sequence.
type epochHigh struct {
	epoch string
	high  int64
}

// spResolved is a metric as a placement resolves it.
type spResolved struct {
	name string // its name, or its alias's in the birth
	typ  uint32 // its datatype, from the payload or the birth
	hist bool   // flagged is_historical
	val  engine.Value
}

// parseTopic reads a Sparkplug B message topic.
func parseTopic(topic string) (*spMessage, error) {
	bad := func(why string) error {
		return fmt.Errorf("topic %q is not a Sparkplug B message topic (%s/{group}/{type}/{edge}[/{device}]): %s", topic, Namespace, why)
	}
	sp := &spMessage{birth: -1}
	levels, ok := splitLevels(sp.levelBuf[:0], topic)
	if err := notAnEdges(topic, levels); err != nil {
		return nil, err
	}
	if !ok || len(levels) < 4 || levels[0] != Namespace {
		return nil, bad("wrong levels")
	}
	sp.levels, sp.group, sp.edge = levels, levels[1], levels[3]
	found := false
	for i, n := range spTypeNames {
		if levels[2] == n {
			sp.typ, found = spType(i), true
		}
	}
	switch {
	case !found:
		return nil, bad(fmt.Sprintf("message type %q is not one a route decides (NBIRTH, NDATA, NDEATH, DBIRTH, DDATA, DDEATH)", levels[2]))
	case sp.typ.device() != (len(levels) == 5):
		return nil, bad(fmt.Sprintf("a %s message names a device level if and only if it is a device message", sp.typ))
	}
	if len(levels) == 5 {
		sp.device = levels[4]
	}
	for _, l := range levels[1:] {
		if l == "" {
			return nil, bad("an empty level")
		}
		if len(l) > engine.MaxIdentityBytes {
			return nil, bad(fmt.Sprintf("a level of %d bytes, over %d", len(l), engine.MaxIdentityBytes))
		}
	}
	return sp, nil
}

// notAnEdges refuses, saying what it is and where it came from, a host
// application's message on a topic a route's filter covers: a command to
// an edge (NCMD, DCMD) or a host's state (spBv1.0/STATE/{host}). A route
// subscribes to the types it decides alone (Subscriptions), so such a
// message came another way.
func notAnEdges(topic string, levels []string) error {
	if len(levels) < 3 || levels[0] != Namespace {
		return nil
	}
	var what string
	switch {
	case levels[1] == "STATE" && len(levels) == 3:
		what = fmt.Sprintf("host application %q's STATE message (Sparkplug 3.0)", levels[2])
	case len(levels) == 4 && levels[2] == "NCMD":
		what = fmt.Sprintf("a host application's NCMD, a command to edge node %q of group %q", levels[3], levels[1])
	case len(levels) == 5 && levels[2] == "DCMD":
		what = fmt.Sprintf("a host application's DCMD, a command to device %q of edge node %q of group %q", levels[4], levels[3], levels[1])
	default:
		return nil
	}
	return fmt.Errorf("topic %q is %s, not an edge's message: a sparkplug route decides NBIRTH, NDATA, NDEATH, DBIRTH, DDATA and DDEATH, "+
		"and subscribes to those alone; this one came another way: through a later route's filter that covers it (a message goes to the "+
		"first route whose topic matches: narrow that filter, or this route's topic), a subscription a persistent MQTT session kept from an "+
		"older configuration (name it in mqtt.former_filters), a jetstream stream's subjects (leave the command and STATE subjects out of "+
		"jetstream.subjects) or an ingested file", topic, what)
}

// splitLevels appends topic's levels to dst, within its capacity: false
// when there are more.
func splitLevels(dst []string, topic string) ([]string, bool) {
	for {
		level, rest, more := strings.Cut(topic, "/")
		if len(dst) == cap(dst) {
			return dst, false
		}
		dst = append(dst, level)
		if !more {
			return dst, true
		}
		topic = rest
	}
}

// checkPayload refuses what no session could place: a missing or
// out-of-range seq or bdSeq, or a missing timestamp.
func (sp *spMessage) checkPayload() error {
	p := &sp.p
	sp.seqRaw = -1
	if sp.typ != spNDeath { // an NDEATH, the broker's Will, carries no seq
		if !p.HasSeq {
			return fmt.Errorf("%s has no seq", sp.typ)
		}
		if p.Seq > 255 {
			return fmt.Errorf("seq %d is out of range (0–255)", p.Seq)
		}
		if !p.HasTimestamp {
			// Sparkplug B 3.0 requires it, and it is what tells which of
			// the edge's births a message belongs to: without it, a replay
			// of an earlier session would be read, and applied, in the
			// current one.
			return fmt.Errorf("%s has no timestamp: the birth it belongs to cannot be told", sp.typ)
		}
		sp.seqRaw = int64(p.Seq)
	}
	if sp.typ == spNBirth || sp.typ == spNDeath {
		if !p.HasBdSeq {
			return fmt.Errorf("%s has no bdSeq metric", sp.typ)
		}
		if p.BdSeq > 255 {
			return fmt.Errorf("bdSeq %d is out of range (0–255)", p.BdSeq)
		}
	}
	birth := sp.typ == spNBirth || sp.typ == spDBirth
	var aliases map[uint64]int // a birth's, to refuse one given twice
	for i, mt := range p.Metrics {
		if birth && mt.HasAlias {
			// Data by an alias two metrics share could be read as either:
			// the table would keep whichever came last.
			if j, dup := aliases[mt.Alias]; dup {
				return fmt.Errorf("%s metrics %d and %d have the same alias %d", sp.typ, j, i, mt.Alias)
			}
			if aliases == nil {
				aliases = map[uint64]int{}
			}
			aliases[mt.Alias] = i
		}
		if mt.Name == "" && !mt.HasAlias {
			return fmt.Errorf("metric %d has neither a name nor an alias", i)
		}
		if len(mt.Name) > engine.MaxIdentityBytes {
			return fmt.Errorf("metric %d: its name is %d bytes, over %d", i, len(mt.Name), engine.MaxIdentityBytes)
		}
		if sp.typ == spNBirth || sp.typ == spDBirth {
			if mt.Name == "" {
				return fmt.Errorf("%s metric %d has no name: a birth certificate names every metric", sp.typ, i)
			}
		}
	}
	return nil
}

// unwrap8 places an 8-bit counter value raw next to h, an unwrapped value:
// the value congruent to raw modulo 256 nearest h (RFC 1982 serial number
// arithmetic). Exactly half the ring away it cannot be placed.
func unwrap8(raw, h int64) (int64, bool) {
	d := ((raw-h)%256 + 256) % 256
	switch {
	case d == 128:
		return 0, false
	case d < 128:
		return h + d, true
	}
	return h + d - 256, true
}

// epochOf returns the epoch text and value of a birth: "5" for the first
// NBIRTH of session 5, "5.1" for its first rebirth.
func epochOf(bdSeq int64, rebirth int) (string, int64) {
	v := bdSeq<<20 | int64(rebirth)
	if rebirth == 0 {
		return strconv.FormatInt(bdSeq, 10), v
	}
	return strconv.FormatInt(bdSeq, 10) + "." + strconv.Itoa(rebirth), v
}
