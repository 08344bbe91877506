package engine

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/buger/jsonparser"
)

// DefaultMaxPayload is the payload size above which a message is malformed.
const DefaultMaxPayload = 256 << 10

// valueKind is the JSON type of an extracted field.
type valueKind uint8

const (
	vAbsent valueKind = iota
	vString
	vNumber
	vBool
	vNull
	vComposite // object or array: never a valid field value
	// vUnread is a field met after its message was found malformed, met
	// twice, or cut short by the payload's end: its value is not known.
	vUnread
)

var kindNames = [...]string{"absent", "string", "number", "boolean", "null", "object or array", "not read"}

// value is one extracted field: its kind and its canonical text (strings
// unescaped, numbers as canonical decimals).
type value struct {
	text    string
	kind    valueKind
	integer bool // a number written as an integer literal
}

// maxIdentityBytes bounds each source part, id, epoch and entity name: they
// become store keys, which must stay small.
const maxIdentityBytes = 1024

// maxSourceBytes bounds a source's parts together: its window's key is all
// of them with its route's name (at most maxRouteNameBytes) and a few bytes
// of lengths, and a PostgreSQL index entry holds at most 2704 bytes.
const (
	maxSourceBytes    = 2 * maxIdentityBytes
	maxRouteNameBytes = 64
)

// Delivery is a message after extraction and validation: everything decide
// and the effects need, nothing more. It is one allocation a message, of
// 704 bytes with the runtime's header: a field more moves it up a size
// class (BenchmarkDecodeDecide's B/op shows it).
type Delivery struct {
	route    *route
	vals     []value // one per route path
	source   []string
	epoch    string
	epochInt int64
	epochNum bool
	older    bool  // its kind found its integer epoch new, though older than the current one (SetOlderEpoch)
	seen     bool  // its kind's state proves it applied, whatever the key window holds (SetSeen)
	seq      int64 // -1 for id routes
	id       string
	key      Hash
	digest   Hash

	entities []string   // rendered entity name per route effect; "" skips it
	targets  []string   // rendered forward target per route effect; "" skips it (nil without forwards)
	err      error      // the first bad value extract met
	text     string     // the payload as one string: values written plainly are substrings of it
	placer   Placer     // a kind's, whose identity is placed at decide time; nil for json
	more     *[]reading // the values of the paths a kind read more than once (SetReadings); nil until one does

	valsBuf [12]value // backing arrays: one allocation per message
	srcBuf  [4]string
	entBuf  [4]string
	plBuf   Placement // the Placement its kind's Place, Applied and Held are given (see placement)
}

// decodeError is a malformed message's reason.
type decodeError struct{ reason string }

func (e *decodeError) Error() string { return e.reason }

func malformed(format string, a ...any) error {
	return &decodeError{reason: fmt.Sprintf(format, a...)}
}

// Prepare decodes messages ahead of Process or Submit, so that a source
// can do that work on its own goroutine while the engine decides the
// previous batch. Decoding depends only on the configured routes: Prepare is
// safe for concurrent use and never blocks on the engine. Preparing is
// optional; a message must not be changed after it.
func (e *Engine) Prepare(msgs []Message) {
	for i := range msgs {
		m := &msgs[i]
		m.prepared, m.prepErr = e.decodeFresh(m)
	}
}

// decode extracts only the route's configured paths from the payload, or
// returns what Prepare found.
func (e *Engine) decode(m *Message) (*Delivery, error) {
	if m.prepared != nil || m.prepErr != nil {
		return m.prepared, m.prepErr
	}
	return e.decodeFresh(m)
}

func (e *Engine) decodeFresh(m *Message) (*Delivery, error) {
	if m.Invalid != "" {
		return nil, malformed("%s", m.Invalid)
	}
	if why := notTopicName(m.Topic); why != "" {
		return nil, malformed("topic %q %s, which no MQTT topic name may", m.Topic, why)
	}
	r := e.routeFor(m.Topic)
	if r == nil {
		return nil, malformed("no route matches topic %q", m.Topic)
	}
	d := &Delivery{route: r, seq: -1}
	if len(m.Payload) > e.maxPayload { // read no further; recorded under its route, and its source where topic levels name it
		d.clearVals()
		return d, malformed("payload is %d bytes, over max_payload %d", len(m.Payload), e.maxPayload)
	}
	d.entities = d.entBuf[:0]
	var err error
	d.placer, err = r.reader.Decode(d, m)
	return d, err
}

// Decode reads a JSON delivery: its paths in one pass over the payload,
// then its identity, key and digest.
func (jr *jsonReader) Decode(d *Delivery, m *Message) (Placer, error) {
	d.clearVals()
	if err := d.extract(m); err != nil {
		return nil, err
	}
	if err := d.identity(jr, m.Topic); err != nil {
		return nil, err
	}
	d.hash(jr, m.Payload)
	return nil, nil
}

// notTopicName says why topic cannot be an MQTT topic name, which a broker
// would never deliver but a capture or a JetStream subject may hold: its
// levels name sources and entities, and bytes that are not UTF-8 would be
// read as U+FFFD, two producers' topics as one. "" when it can be one.
func notTopicName(topic string) string {
	switch {
	case !utf8.ValidString(topic):
		return "is not valid UTF-8"
	case strings.ContainsAny(topic, "+#"):
		return "holds a wildcard ('+' or '#')"
	case strings.ContainsRune(topic, 0):
		return "holds NUL"
	}
	return ""
}

// topKind names the kind of the valid JSON value b: object, array,
// string, number, boolean or null.
func topKind(b []byte) string {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return "object"
		case '[':
			return "array"
		case '"':
			return "string"
		case 't', 'f':
			return "boolean"
		case 'n':
			return "null"
		}
		return "number"
	}
	return "number"
}

// clearVals makes room for a value per route path, all absent: in the
// Delivery itself unless the route reads more than it holds.
func (d *Delivery) clearVals() {
	n := len(d.route.paths)
	d.vals = d.valsBuf[:0]
	if n > len(d.valsBuf) {
		d.vals = make([]value, 0, n)
	}
	d.vals = d.vals[:n]
	if d.more != nil {
		*d.more = (*d.more)[:0]
	}
}

func (d *Delivery) extract(m *Message) error {
	r := d.route
	if len(r.payload) > 0 {
		d.text = string(m.Payload) // one allocation for every plain value
	}
	if !scanJSON(m.Payload, r.trie, d) {
		if nestsTooDeep(m.Payload) {
			return malformed("payload nests arrays and objects more than %d levels deep", maxJSONDepth)
		}
		return malformed("payload is not valid JSON")
	}
	if len(r.payload) > 0 {
		if kind := topKind(m.Payload); kind != "object" {
			return malformed("payload is a JSON %s, not an object: the route reads fields of it", kind)
		}
	}
	if d.err != nil {
		return d.err
	}
	for i, p := range r.paths {
		if p.topic < 0 {
			continue
		}
		if level, ok := topicLevel(m.Topic, p.topic); ok { // no slice of levels for each message
			d.vals[i] = value{kind: vString, text: level}
		}
	}
	return nil
}

// found takes the value of payload slot, payload[start:end], from the
// scanner; ascii says the value is a string of printable ASCII without
// escapes. The first error sticks.
func (d *Delivery) found(slot, start, end int, kind valueKind, ascii bool) {
	r := d.route
	i := r.slots[slot]
	switch {
	case d.vals[i].kind != vAbsent: // which of its values counts is not known
		if d.err == nil {
			d.err = malformed("field %s appears more than once", r.paths[i].text)
		}
		d.vals[i] = value{kind: vUnread}
	case d.err != nil:
		d.vals[i] = value{kind: vUnread}
	default:
		if ascii {
			d.vals[i] = value{kind: vString, text: d.text[start:end]}
			return
		}
		d.vals[i], d.err = canonical(r.paths[i].text, d.text[start:end], kind)
	}
}

// canonical returns the value of raw, a payload value's text (a string's
// without its quotes). The value's text is raw itself, not a copy, when raw
// is already canonical: a string without escapes, a plain integer.
func canonical(name string, raw string, kind valueKind) (value, error) {
	switch kind {
	case vString:
		s := raw
		if strings.IndexByte(raw, '\\') >= 0 {
			// The parser reads an escaped lone surrogate as U+FFFD, so
			// "\ud800", "\udc00" and "\ufffd" would be one id, one key:
			// distinct messages suppressed as duplicates. Such an escape
			// names no character: malformed, like an invalid UTF-8 byte.
			if LoneSurrogate(raw) {
				return value{}, malformed("%s: string holds a lone UTF-16 surrogate escape", name)
			}
			var err error
			if s, err = jsonparser.ParseString([]byte(raw)); err != nil {
				return value{}, malformed("%s: bad string: %v", name, err)
			}
		}
		if !utf8.ValidString(s) {
			return value{}, malformed("%s: string is not valid UTF-8", name)
		}
		return value{kind: vString, text: s}, nil
	case vNumber:
		t, integer, err := canonicalNumber(raw)
		if err != nil {
			return value{}, malformed("%s: %v", name, err)
		}
		return value{kind: vNumber, text: t, integer: integer}, nil
	default:
		return value{kind: kind, text: raw}, nil
	}
}

// LoneSurrogate reports whether raw, a JSON string's text without its
// quotes, holds a \uD800-\uDFFF escape that is not half of a high-low
// pair: the parser reads every such escape as U+FFFD, so distinct texts
// would read as one.
func LoneSurrogate(raw string) bool {
	hex := func(i int) (rune, bool) { // the \uXXXX escape at raw[i:]
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(raw[i+2:i+6], 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := hex(i)
		switch {
		case !ok:
			i++ // a one-letter escape, such as \\
		case r >= 0xD800 && r < 0xDC00:
			if lo, ok := hex(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}

// identity validates the identity fields and fills source, epoch, seq, id.
func (d *Delivery) identity(jr *jsonReader, topic string) error {
	r := d.route
	d.source = d.srcBuf[:0]
	if len(jr.source) > len(d.srcBuf) {
		d.source = make([]string, 0, len(jr.source))
	}
	d.source = d.source[:len(jr.source)]
	total := 0
	for n, i := range jr.source {
		v := d.vals[i]
		switch v.kind {
		case vString, vNumber, vBool:
			if len(v.text) > maxIdentityBytes {
				return malformed("source field %s is %d bytes, over %d", r.paths[i].text, len(v.text), maxIdentityBytes)
			}
			d.source[n] = v.text
			total += len(v.text)
		case vAbsent:
			return malformed("source field %s is missing", r.paths[i].text)
		default:
			return malformed("source field %s: want a string or number, got %s", r.paths[i].text, kindNames[v.kind])
		}
	}
	if total > maxSourceBytes {
		return malformed("the source fields are %d bytes together, over %d", total, maxSourceBytes)
	}
	if jr.sequence >= 0 {
		p, v := r.paths[jr.sequence], d.vals[jr.sequence]
		if p.topic >= 0 && v.kind == vString { // a topic level, text: its digits are the sequence
			if v.text == "" || strings.Trim(v.text, "0123456789") != "" {
				return malformed("sequence %s is %q: a topic level read as a sequence must be a decimal integer", p.text, v.text)
			}
			v = value{kind: vNumber, integer: true, text: v.text}
		}
		s, err := sequenceOf(p.text, v)
		if err != nil {
			return err
		}
		d.seq = s
	}
	if jr.epoch >= 0 {
		if err := d.epochOf(r.paths[jr.epoch].text, d.vals[jr.epoch]); err != nil {
			return err
		}
	}
	if jr.id >= 0 {
		v := d.vals[jr.id]
		name := r.paths[jr.id].text
		switch {
		case v.kind == vAbsent:
			return malformed("id field %s is missing", name)
		case v.kind == vString && v.text == "":
			return malformed("id field %s is empty", name)
		case v.kind != vString && v.kind != vNumber:
			return malformed("id field %s: want a string or number, got %s", name, kindNames[v.kind])
		case len(v.text) > maxIdentityBytes:
			return malformed("id field %s is %d bytes, over %d", name, len(v.text), maxIdentityBytes)
		}
		d.id = v.text
	}
	for i, num := range r.numeric {
		if k := d.vals[i].kind; num && k != vAbsent && k != vNumber {
			return malformed("effect field %s: want a JSON number, got %s", r.paths[i].text, kindNames[k])
		}
	}
	for i, v := range d.vals {
		if v.kind == vComposite {
			return malformed("field %s: want a scalar, got %s", r.paths[i].text, kindNames[v.kind])
		}
	}
	return d.entityNames(topic)
}

// entityNames renders every effect's entity name ("" when a field it names
// is absent: the effect is skipped). The rendered names share one
// allocation.
func (d *Delivery) entityNames(topic string) error {
	var buf [192]byte
	var endBuf [8]int
	b, ends := buf[:0], endBuf[:0] // where each effect's name ends in b, or one of:
	const (
		skipped = -1
		literal = -2 // the template is one literal: no need to copy it
	)
	for i, ef := range d.route.effects {
		if ef.entity == nil { // a sql or forward effect
			ends = append(ends, skipped)
			continue
		}
		if len(ef.entity) == 1 && ef.entity[0].src < 0 {
			ends = append(ends, literal)
			continue
		}
		start := len(b)
		var ok bool
		b, ok = appendName(b, ef.entity, d.vals)
		switch {
		case !ok:
			b = b[:start]
			ends = append(ends, skipped)
			continue
		case len(b) == start:
			return malformed("effects[%d]: the entity name is empty", i)
		case len(b)-start > maxIdentityBytes:
			return malformed("effects[%d]: the entity name is %d bytes, over %d", i, len(b)-start, maxIdentityBytes)
		}
		ends = append(ends, len(b))
	}
	all, start := string(b), 0
	d.entities = d.entities[:0]
	for i, end := range ends {
		name := ""
		switch end {
		case skipped:
		case literal:
			name = d.route.effects[i].entity[0].lit
		default:
			name, start = all[start:end], end
		}
		d.entities = append(d.entities, name)
	}
	return d.forwardTargets(topic)
}

// forwardTargets renders every forward effect's topic or subject; one that
// renders to something no downstream takes makes the message malformed,
// before any decision.
func (d *Delivery) forwardTargets(topic string) error {
	if d.route.forwards == 0 {
		return nil
	}
	d.targets = make([]string, len(d.route.effects))
	for i, ef := range d.route.effects {
		if ef.fwd == nil {
			continue
		}
		t, ok := renderTarget(ef.fwd, d.vals, topic)
		if !ok {
			continue
		}
		if msg := checkTarget(ef.fwd.output, t); msg != "" {
			return malformed("effects[%d]: forward %s %s", i, ef.fwd.output, msg)
		}
		if strings.HasPrefix(t, "$") && !ef.fwd.ownsDollar() {
			// $-topics and subjects are the broker's ($SYS, $CONTROL,
			// $share; NATS $JS, $SYS): a producer's field must not
			// choose one, where a broker may act on what it receives.
			return malformed("effects[%d]: forward %s %q begins with $, which the message's fields chose: topics and subjects beginning with $ are the broker's", i, ef.fwd.output, t)
		}
		d.targets[i] = t
	}
	if msg := d.checkMeta(); msg != "" {
		return malformed("forward: %s", msg)
	}
	return nil
}

func sequenceOf(name string, v value) (int64, error) {
	switch v.kind {
	case vAbsent:
		return 0, malformed("sequence field %s is missing", name)
	case vNumber:
	default:
		return 0, malformed("sequence field %s: want a JSON integer, got %s", name, kindNames[v.kind])
	}
	if !v.integer {
		return 0, malformed("sequence field %s is written with a fraction or an exponent (%s): want a JSON integer", name, v.text)
	}
	if strings.HasPrefix(v.text, "-") {
		return 0, malformed("sequence field %s: %s is negative", name, v.text)
	}
	s, err := strconv.ParseInt(v.text, 10, 64)
	if err != nil {
		return 0, malformed("sequence field %s: %s is out of range (0 <= s < 2^63)", name, v.text)
	}
	return s, nil
}

func (d *Delivery) epochOf(name string, v value) error {
	switch v.kind {
	case vAbsent:
		return malformed("epoch field %s is missing", name)
	case vString:
		if v.text == "" {
			return malformed("epoch field %s is an empty string", name)
		}
		if len(v.text) > maxIdentityBytes {
			return malformed("epoch field %s is %d bytes, over %d", name, len(v.text), maxIdentityBytes)
		}
		d.epoch = v.text
		return nil
	case vNumber:
		if !v.integer {
			return malformed("epoch field %s is written with a fraction or an exponent (%s): want a JSON integer", name, v.text)
		}
		n, err := strconv.ParseInt(v.text, 10, 64)
		if err != nil {
			return malformed("epoch field %s: %s is not in int64 range", name, v.text)
		}
		d.epoch, d.epochNum, d.epochInt = v.text, true, n
		return nil
	default:
		return malformed("epoch field %s: want an integer or a string, got %s", name, kindNames[v.kind])
	}
}

// hash derives the idempotency key and the content digest. The digest
// covers every value the route reads, in canonical form, so a re-serialised
// payload with the same content has the same digest; a route that forwards
// the payload reads all of it.
func (d *Delivery) hash(jr *jsonReader, payload []byte) {
	r := d.route
	if jr.sequence >= 0 {
		d.key = SequencedKey(r.Name, d.source, d.epochTag(jr), d.seq)
	} else {
		d.key = IDKey(r.Name, d.source, d.id)
	}
	var buf [512]byte
	b := buf[:0]
	for i, p := range r.paths {
		b = appendField(b, p.text)
		b = append(b, byte(d.vals[i].kind))
		b = appendField(b, d.vals[i].text)
	}
	if r.forwards > 0 {
		// appendContent recurses, so whatever it is given escapes: its own
		// buffer keeps buf on the stack for every other route.
		b = appendContent(append(make([]byte, 0, len(b)+len(payload)+64), b...), payload)
	}
	d.digest = sha256.Sum256(b)
}

// epochTag keeps numeric 5 and string "5" apart in the key.
func (d *Delivery) epochTag(jr *jsonReader) string {
	if jr.epoch < 0 {
		return ""
	}
	if d.epochNum {
		return "n" + d.epoch
	}
	return "s" + d.epoch
}

// slotIndex maps payload slots to path indexes.
func (c *route) slotIndex() []int {
	if c.slots == nil {
		c.slots = make([]int, len(c.payload))
		for i, p := range c.paths {
			if p.topic < 0 {
				c.slots[p.slot] = i
			}
		}
	}
	return c.slots
}
