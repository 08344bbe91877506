package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
)

// placeSparkplug gives a Sparkplug message its identity against the edge's
// committed session, at decide time: its epoch (the session, from bdSeq or
// from the birth it belongs to), its sequence (seq unwrapped in that epoch's
// window), its metrics' names (aliases resolved with that birth's tables),
// then its values, key and digest. A message that cannot be placed is held
// (stop, with the decision to record); nothing is ever guessed.
func (e *Engine) placeSparkplug(d *decoded, topic string) (dec Decision, stop bool) {
	sp := d.sp
	sp.birth, sp.newBirth, sp.rebirth, sp.bdSeq = -1, false, 0, 0
	d.seq, d.epoch, d.epochNum, d.epochInt = -1, "", true, 0
	hold := func(format string, a ...any) (Decision, bool) {
		return Decision{Outcome: Quarantined, Reason: fmt.Sprintf(format, a...), Route: d.route.Name,
			Source: d.source, Sequence: -1}, true
	}
	src := e.lookupSource(d)
	var st *SparkplugState
	if src != nil {
		st = src.Sparkplug
	}
	var why string
	switch sp.typ {
	case spNBirth:
		why = e.placeBirth(d, src, st)
	case spNDeath:
		why = e.placeDeath(d, st)
	default:
		why = e.placeData(d, src, st)
	}
	if why != "" {
		return hold("%s", why)
	}
	if err := e.sparkplugValues(d, topic); err != nil {
		return Decision{Outcome: Malformed, Reason: err.Error(), Route: d.route.Name, Source: d.source, Sequence: -1}, true
	}
	if sp.typ == spNDeath {
		d.key = SparkplugDeathKey(d.route.Name, d.source, "n"+d.epoch)
	} else {
		d.key = SequencedKey(d.route.Name, d.source, "n"+d.epoch, d.seq)
	}
	return Decision{}, false
}

// placeBirth places an NBIRTH: a newer bdSeq starts a session, the same
// bdSeq with a later timestamp is a rebirth in it, and one matching a kept
// birth's content is that birth again (its replay). Anything else is held.
func (e *Engine) placeBirth(d *decoded, src *SourceState, st *SparkplugState) string {
	sp := d.sp
	if why := sp.resolve(nil); why != "" {
		return why
	}
	d.digest = sp.digest()
	raw := int64(sp.p.BdSeq)
	if st == nil || len(st.Births) == 0 {
		sp.bdSeq, sp.newBirth = raw, true
		return e.placeSeq(d, nil)
	}
	b, ok := unwrap8(raw, st.BdSeq)
	switch {
	case !ok:
		return fmt.Sprintf("bdSeq %d cannot be placed: 128 from the edge's current session %d", raw, st.BdSeq)
	case b < 0:
		return fmt.Sprintf("bdSeq %d cannot be placed: it would come before the edge's first session", raw)
	}
	sp.bdSeq = b
	if i := st.findBirth(b, d.digest); i >= 0 {
		sp.birth = i
		return e.placeSeq(d, src)
	}
	cur := st.Births[0]
	switch {
	case b > st.BdSeq:
		sp.newBirth = true
	case b == cur.BdSeq && sp.p.Timestamp > cur.Stamp:
		sp.newBirth, sp.rebirth = true, cur.Rebirth+1
		if sp.rebirth >= 1<<20 {
			return fmt.Sprintf("session %d has had too many rebirths to number another", b)
		}
	default:
		return fmt.Sprintf("%s (bdSeq %d, raw %d) is neither a kept birth of the edge nor newer than its current one (%s)", reasonOldEpoch, b, raw, cur.Epoch)
	}
	return e.placeSeq(d, nil)
}

// placeDeath places an NDEATH by its bdSeq: its identity is (source,
// session, NDEATH), so a replayed one is a duplicate.
func (e *Engine) placeDeath(d *decoded, st *SparkplugState) string {
	sp := d.sp
	raw := int64(sp.p.BdSeq)
	sp.bdSeq = raw
	if st != nil && len(st.Births) > 0 {
		b, ok := unwrap8(raw, st.BdSeq)
		switch {
		case !ok:
			return fmt.Sprintf("NDEATH bdSeq %d cannot be placed: 128 from the edge's current session %d", raw, st.BdSeq)
		case b < 0:
			return fmt.Sprintf("NDEATH bdSeq %d cannot be placed: it would come before the edge's first session", raw)
		}
		sp.bdSeq = b
		for i, birth := range st.Births {
			if birth.BdSeq == b {
				sp.birth = i
				break
			}
		}
	}
	d.epoch, d.epochInt = strconv.FormatInt(sp.bdSeq, 10), sp.bdSeq<<20
	var node *SparkplugTable
	if sp.birth >= 0 {
		node = &st.Births[sp.birth].Node
	}
	if why := sp.resolve(node); why != "" {
		return why
	}
	d.digest = sp.digest()
	return ""
}

// placeData places NDATA, DBIRTH, DDATA and DDEATH in the birth their
// timestamp falls in, and resolves their aliases with its tables.
func (e *Engine) placeData(d *decoded, src *SourceState, st *SparkplugState) string {
	sp := d.sp
	if st == nil || len(st.Births) == 0 {
		return fmt.Sprintf("no birth certificate seen for edge %q of group %q: an NBIRTH comes first", sp.edge, sp.group)
	}
	i := st.attribute(sp)
	if i < 0 {
		return fmt.Sprintf("%s: timestamp %d predates every kept birth of edge %q", reasonOldEpoch, sp.p.Timestamp, sp.edge)
	}
	sp.birth = i
	birth := &st.Births[i]
	sp.bdSeq = birth.BdSeq
	var table *SparkplugTable
	switch sp.typ {
	case spNData:
		table = &birth.Node
	case spDData, spDDeath:
		dev, ok := birth.Devices[sp.device]
		if !ok {
			return fmt.Sprintf("no DBIRTH seen for device %q of edge %q in its session %s", sp.device, sp.edge, birth.Epoch)
		}
		table = &dev.Table
	}
	if why := sp.resolve(table); why != "" {
		return why
	}
	d.digest = sp.digest()
	return e.placeSeq(d, src)
}

// placeSeq sets d's epoch from the message's birth and unwraps its seq
// against the epoch window's highest sequence; a new birth's seq starts a
// window as it is. A message whose content was applied at a placement
// congruent to its seq is that message again (same key, same digest: a
// proven duplicate), however far behind the highest it is; otherwise it
// takes the nearest placement, unless that is ambiguous (half the ring
// away) or contradicts its timestamp (older than the highest's, yet above
// it: a replay more than half the ring behind).
func (e *Engine) placeSeq(d *decoded, src *SourceState) string {
	sp := d.sp
	if sp.newBirth {
		d.epoch, d.epochInt = sparkplugEpoch(sp.bdSeq, sp.rebirth)
		d.seq = sp.seqRaw
		return ""
	}
	b := &src.Sparkplug.Births[sp.birth]
	d.epoch, d.epochInt = sparkplugEpoch(b.BdSeq, b.Rebirth)
	i := src.find(d.epoch, true)
	if i < 0 {
		return fmt.Sprintf("%s: the window of session %s is no longer kept", reasonOldEpoch, d.epoch)
	}
	h := src.Epochs[i].High
	if h < 0 {
		d.seq = sp.seqRaw
		return ""
	}
	s, ok := unwrap8(sp.seqRaw, h)
	older := sp.p.HasTimestamp && sp.p.Timestamp < b.HighStamp
	if !ok || s <= h || older {
		if c, found := e.appliedAt(d, s, ok, h); found {
			d.seq = c
			return ""
		}
	}
	switch {
	case !ok:
		return fmt.Sprintf("seq %d cannot be placed: 128 from the session's highest, %d (seq %d)", sp.seqRaw, h, h%256)
	case s < 0:
		return fmt.Sprintf("seq %d cannot be placed: it would come before the session's first (highest %d)", sp.seqRaw, h)
	case s > h && older:
		return fmt.Sprintf("seq %d cannot be placed: its timestamp %d predates that of the session's highest, %d (seq %d), "+
			"yet it would come after it: it is more than half the ring behind", sp.seqRaw, sp.p.Timestamp, h, h%256)
	}
	d.seq = s
	return ""
}

// appliedAt looks for a placement at or below h, congruent to the seq,
// whose key the key window holds with d's digest.
func (e *Engine) appliedAt(d *decoded, s int64, ok bool, h int64) (int64, bool) {
	if !ok || s > h {
		s = h - ((h-d.sp.seqRaw)%256+256)%256
	}
	low := max(0, h-int64(e.opts.SequenceSpan))
	for c := s; c >= low; c -= 256 {
		if dg, hit := e.keys.lookup(SequencedKey(d.route.Name, d.source, "n"+d.epoch, c)); hit && dg == digest64(d.digest) {
			return c, true
		}
	}
	return 0, false
}

// resolve names every metric (by its name, or by its alias in table) and
// reads its value with its datatype (the payload's, or the birth's).
func (sp *spMessage) resolve(table *SparkplugTable) string {
	n := len(sp.p.Metrics)
	if cap(sp.metrics) < n {
		sp.metrics = make([]spResolved, n)
	}
	sp.metrics = sp.metrics[:n]
	for i, mt := range sp.p.Metrics {
		name := mt.Name
		if name == "" {
			var ok bool
			if table != nil {
				name, ok = table.Aliases[mt.Alias]
			}
			if !ok {
				return fmt.Sprintf("alias %d of edge %q is not in its current birth certificate", mt.Alias, sp.edge)
			}
		}
		typ := mt.Datatype
		if typ == 0 && table != nil {
			typ = table.Types[name]
		}
		v, ok := metricValue(mt.Value, mt.Datatype == 0, typ)
		if !ok {
			return fmt.Sprintf("metric %q: %s is not a number", name, mt.Value.Text)
		}
		sp.metrics[i] = spResolved{name: name, typ: typ, val: v}
	}
	return ""
}

// Sparkplug datatypes the engine reads again from a birth.
const (
	spInt8  = 1
	spInt16 = 2
	spInt32 = 3
	spInt64 = 4
)

// metricValue turns a decoded value into the engine's; reread applies
// the birth's signed integer type to an integer whose payload left its
// datatype out.
func metricValue(v SparkplugValue, reread bool, typ uint32) (value, bool) {
	switch v.Kind {
	case SparkplugNumber:
		text := v.Text
		if reread && v.Width > 0 && typ >= spInt8 && typ <= spInt64 {
			text = strconv.FormatInt(signed(v.Bits, typ), 10)
		}
		t, integer, err := canonicalNumber(text)
		if err != nil {
			return value{}, false
		}
		return value{kind: vNumber, text: t, integer: integer}, true
	case SparkplugString:
		return value{kind: vString, text: v.Text}, true
	case SparkplugBool:
		return value{kind: vBool, text: v.Text}, true
	case SparkplugNull:
		return value{kind: vNull, text: "null"}, true
	}
	return value{kind: vComposite, text: v.Text}, true
}

func signed(bits uint64, typ uint32) int64 {
	switch typ {
	case spInt8:
		return int64(int8(bits))
	case spInt16:
		return int64(int16(bits))
	case spInt32:
		return int64(int32(bits))
	}
	return int64(bits)
}

// digest covers the resolved content: type, device, timestamp, seq, and
// each metric's resolved name, datatype, timestamp and value, in order.
func (sp *spMessage) digest() Hash {
	h := sha256.New()
	var buf [1024]byte // written to h whenever the next metric might not fit
	b := append(buf[:0], byte(sp.typ))
	b = appendField(b, sp.device)
	b = binary.BigEndian.AppendUint64(b, sp.p.Timestamp)
	b = binary.BigEndian.AppendUint64(b, uint64(sp.seqRaw))
	for i, mt := range sp.p.Metrics {
		r := &sp.metrics[i]
		if len(b)+3*binary.MaxVarintLen64+13+len(r.name)+len(r.val.text)+len(mt.Value.Content) > cap(b) {
			h.Write(b)
			b = b[:0]
		}
		b = appendField(b, r.name)
		b = binary.BigEndian.AppendUint32(b, r.typ)
		b = binary.BigEndian.AppendUint64(b, mt.Timestamp)
		b = append(b, byte(r.val.kind))
		b = appendField(b, r.val.text)
		b = appendField(b, mt.Value.Content)
	}
	h.Write(b)
	var out Hash
	h.Sum(out[:0])
	return out
}

// sparkplugValues reads the route's paths from the placed message, then
// renders its entity names and forward targets.
func (e *Engine) sparkplugValues(d *decoded, topic string) error {
	r, sp := d.route, d.sp
	d.vals = d.valsBuf[:0]
	if len(r.paths) > len(d.valsBuf) {
		d.vals = make([]value, 0, len(r.paths))
	}
	d.vals = d.vals[:len(r.paths)]
	for i, p := range r.paths {
		d.vals[i] = sp.pathValue(p)
	}
	for i, v := range d.vals {
		name := r.paths[i].text
		switch {
		case v.kind == vComposite:
			return malformed("%s: a %s value is not a field value", name, v.text)
		case r.numeric[i] && v.kind != vAbsent && v.kind != vNumber:
			return malformed("effect field %s: want a number, got %s", name, kindNames[v.kind])
		}
	}
	return d.entityNames(topic)
}

// pathValue is the value of one route path: a topic level, the payload's
// timestamp or seq, or a metric (its last value in the payload).
func (sp *spMessage) pathValue(p path) value {
	switch {
	case p.topic >= 0:
		if p.topic < len(sp.levels) {
			return value{kind: vString, text: sp.levels[p.topic]}
		}
	case p.segs[0] == "timestamp":
		if sp.p.HasTimestamp {
			return value{kind: vNumber, text: strconv.FormatUint(sp.p.Timestamp, 10), integer: true}
		}
	case p.segs[0] == "seq":
		if sp.seqRaw >= 0 {
			return value{kind: vNumber, text: strconv.FormatInt(sp.seqRaw, 10), integer: true}
		}
	default:
		for i := len(sp.metrics) - 1; i >= 0; i-- {
			if sp.metrics[i].name == p.segs[1] {
				return sp.metrics[i].val
			}
		}
	}
	return value{}
}
