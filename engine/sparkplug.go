package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// Route kinds: how a route's payloads are read.
const (
	KindJSON      = "json"      // the default: JSON payload, fields by dotted path
	KindSparkplug = "sparkplug" // Eclipse Sparkplug B: protobuf payload, spBv1.0 topics
)

// SparkplugNamespace is the first topic level of every Sparkplug B topic.
const SparkplugNamespace = "spBv1.0"

// SparkplugDecoder decodes the protobuf payload of a Sparkplug B message
// into plain terms; the engine does the rest (topic, identity, aliases).
// It is called from Prepare, so it must be safe for concurrent use, and it
// must not keep payload.
type SparkplugDecoder interface {
	DecodeSparkplug(payload []byte) (SparkplugPayload, error)
}

// SparkplugPayload is a decoded Sparkplug B payload.
type SparkplugPayload struct {
	Timestamp    uint64 // ms since the Unix epoch, when HasTimestamp
	HasTimestamp bool
	Seq          uint64 // when HasSeq; the engine refuses one above 255
	HasSeq       bool
	BdSeq        uint64 // the value of the metric named "bdSeq", when HasBdSeq
	HasBdSeq     bool
	Metrics      []SparkplugMetric
}

// SparkplugMetric is one metric of a payload, named or aliased.
type SparkplugMetric struct {
	Name         string // "" when only the alias names it
	Alias        uint64
	HasAlias     bool
	Timestamp    uint64
	HasTimestamp bool
	Datatype     uint32 // Sparkplug DataType; 0 when the payload leaves it out
	Value        SparkplugValue
}

// SparkplugValue is a metric's value in the engine's terms.
type SparkplugValue struct {
	Kind SparkplugValueKind
	// Text is a number's exact decimal text (floats in their shortest
	// round-trip form), a string, "true" or "false"; for an unsupported
	// value, the name of its type.
	Text string
	// Bits and Width are an integer's wire bits (Width 32 for int_value, 64
	// for long_value, else 0): a metric whose datatype only its birth
	// certificate names is read again with that type (a signed Int8 sent
	// as 0xffffffff is -1).
	Bits  uint64
	Width uint8
	// Content is an unsupported value's canonical bytes, for the digest.
	Content string
}

// SparkplugValueKind is the kind of a metric value.
type SparkplugValueKind uint8

// The value kinds. Unsupported values (datasets, templates, bytes, files,
// arrays, NaN and infinities) take part in the digest but are refused as
// effect inputs.
const (
	SparkplugNumber SparkplugValueKind = iota
	SparkplugString
	SparkplugBool
	SparkplugNull
	SparkplugUnsupported
)

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

// spMessage is a Sparkplug message after the stateless decode, and what
// the decision resolves on it.
type spMessage struct {
	typ                 spType
	group, edge, device string
	levels              []string // the topic's, in levelBuf
	levelBuf            [5]string
	p                   SparkplugPayload
	metrics             []spResolved // one per metric of p, in order
	bdSeq               int64        // unwrapped: NBIRTH and NDEATH
	birth               int          // index in the session's births of the birth it belongs to; -1 for a new one
	rebirth             int          // a new NBIRTH: its rebirth number in its session
	newBirth            bool         // a new NBIRTH opens an epoch
	seqRaw              int64
}

// spResolved is a metric as a placement resolves it.
type spResolved struct {
	name string // its name, or its alias's in the birth
	typ  uint32 // its datatype, from the payload or the birth
	val  value  // its value in engine terms
}

// spPath parses a path of a sparkplug route: metrics.<Name> (the name is
// the whole rest, '.' and '/' included), timestamp, seq, or topic[N].
func parseSparkplugPath(p string) (path, error) {
	if strings.HasPrefix(p, "topic[") {
		return parsePath(p)
	}
	if name, ok := strings.CutPrefix(p, "metrics."); ok && name != "" {
		return path{text: p, topic: -1, segs: []string{"metrics", name}}, nil
	}
	if p == "timestamp" || p == "seq" {
		return path{text: p, topic: -1, segs: []string{p}}, nil
	}
	return path{}, fmt.Errorf("bad sparkplug path %q: a sparkplug route reads metrics.<Name>, timestamp, seq or topic[N]", p)
}

// checkSparkplugRoute checks what a sparkplug route must and must not set.
func checkSparkplugRoute(r Route) error {
	if len(r.Source) > 0 || r.Sequence != "" || r.Epoch != "" || r.ID != "" {
		return fmt.Errorf("a sparkplug route sets no source, sequence, epoch or id: they are implied " +
			"(source [group, edge], sequence seq, epoch the edge's session from bdSeq)")
	}
	first, rest, _ := strings.Cut(r.Topic, "/")
	if first != SparkplugNamespace || rest == "" {
		return fmt.Errorf("topic %q: a sparkplug route's topic is under %s/, like %s/+/+/#", r.Topic, SparkplugNamespace, SparkplugNamespace)
	}
	return nil
}

// decodeSparkplug is the stateless part of a Sparkplug message's decode:
// the topic and the payload. Its identity, aliases, key and digest depend
// on the edge's session and are decided with it (placeSparkplug).
func (e *Engine) decodeSparkplug(m *Message, d *decoded) (*decoded, error) {
	sp, err := parseSparkplugTopic(m.Topic)
	if err != nil {
		return d, err
	}
	if sp.p, err = e.opts.Sparkplug.DecodeSparkplug(m.Payload); err != nil {
		return d, malformed("payload is not a Sparkplug B payload: %v", err)
	}
	if err := sp.checkPayload(); err != nil {
		return d, err
	}
	d.sp = sp
	d.source = append(d.srcBuf[:0], sp.group, sp.edge)
	return d, nil
}

func parseSparkplugTopic(topic string) (*spMessage, error) {
	bad := func(why string) error {
		return malformed("topic %q is not a Sparkplug B message topic (%s/{group}/{type}/{edge}[/{device}]): %s", topic, SparkplugNamespace, why)
	}
	sp := &spMessage{birth: -1}
	levels, ok := splitLevels(sp.levelBuf[:0], topic)
	if !ok || len(levels) < 4 || levels[0] != SparkplugNamespace {
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
		if len(l) > maxIdentityBytes {
			return nil, bad(fmt.Sprintf("a level of %d bytes, over %d", len(l), maxIdentityBytes))
		}
	}
	return sp, nil
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
// out-of-range seq or bdSeq.
func (sp *spMessage) checkPayload() error {
	p := &sp.p
	sp.seqRaw = -1
	if sp.typ != spNDeath { // an NDEATH, the broker's Will, carries no seq
		if !p.HasSeq {
			return malformed("%s has no seq", sp.typ)
		}
		if p.Seq > 255 {
			return malformed("seq %d is out of range (0–255)", p.Seq)
		}
		sp.seqRaw = int64(p.Seq)
	}
	if sp.typ == spNBirth || sp.typ == spNDeath {
		if !p.HasBdSeq {
			return malformed("%s has no bdSeq metric", sp.typ)
		}
		if p.BdSeq > 255 {
			return malformed("bdSeq %d is out of range (0–255)", p.BdSeq)
		}
	}
	for i, mt := range p.Metrics {
		if mt.Name == "" && !mt.HasAlias {
			return malformed("metric %d has neither a name nor an alias", i)
		}
		if len(mt.Name) > maxIdentityBytes {
			return malformed("metric %d: its name is %d bytes, over %d", i, len(mt.Name), maxIdentityBytes)
		}
		if sp.typ == spNBirth || sp.typ == spDBirth {
			if mt.Name == "" {
				return malformed("%s metric %d has no name: a birth certificate names every metric", sp.typ, i)
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
func sparkplugEpoch(bdSeq int64, rebirth int) (string, int64) {
	v := bdSeq<<20 | int64(rebirth)
	if rebirth == 0 {
		return strconv.FormatInt(bdSeq, 10), v
	}
	return strconv.FormatInt(bdSeq, 10) + "." + strconv.Itoa(rebirth), v
}
