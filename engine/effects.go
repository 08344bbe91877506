package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
)

// entity is the in-memory projection of one entity: its fields in name
// order. An entity has a few fields, so a scan
// finds one faster than a map would, and a fleet's entities cost the
// collector one slice each rather than a map and a field apiece.
type entity struct {
	fields    []namedField
	changedIn uint64 // the pending batch that last changed it (pending.gen)
	usedIn    uint64 // the pending batch that last looked it up
	// unstored: the engine created it, and no batch that writes it was
	// sealed yet (Batch.NewRows).
	unstored bool
}

type namedField struct {
	name string
	field
}

// field returns the field called name, or nil. The pointer is into the
// entity's slice: it is good until the entity gains a field.
func (ent *entity) field(name string) *field {
	for i := range ent.fields {
		if ent.fields[i].name == name {
			return &ent.fields[i].field
		}
	}
	return nil
}

// add adds f as the field called name, absent from the entity, in its
// place by name: the order the entity's state lists its fields in.
func (ent *entity) add(name string, f field) {
	i := len(ent.fields)
	for i > 0 && ent.fields[i-1].name > name {
		i--
	}
	ent.fields = append(ent.fields, namedField{})
	copy(ent.fields[i+1:], ent.fields[i:])
	ent.fields[i] = namedField{name: name, field: f}
}

type field struct {
	kind    ValueKind
	num     apd.Decimal
	str     string
	version Version
}

// project runs the route's effects of one effective message against the
// entity states, marking what changed, and returns what each operation did
// for the message's audit record, and a note for its reason when a set
// passed over historical values (SetReadings). Paths absent from the message
// do nothing, nor does a set of a path whose values are all historical; an
// entity template naming an absent field skips the effect.
func (e *Engine) project(d *Delivery, ver Version, late bool) (changes []Change, note string) {
	p := &e.pending
	start := len(p.changes)
	for i, ef := range d.route.effects {
		name := d.entities[i]
		if name == "" {
			if n := d.unplacedNote(i, ef); n != "" {
				note = joinReason(note, n)
			}
			continue
		}
		ent := e.entities[name]
		if ent == nil && e.rows != nil {
			ent = e.readEntity(name)
		}
		created := ent == nil
		if created {
			if e.unread != nil {
				e.unread.entity(name)
			}
			ent = &entity{unstored: true}
			name = strings.Clone(name) // name shares its bytes with the message's other names
			e.entities[name] = ent
			if e.rows != nil {
				p.fresh.entities = append(p.fresh.entities, name)
			}
		}
		ent.usedIn = p.gen
		changed := false
		for _, o := range ef.ops {
			v, hist := d.opValue(o)
			if hist.n > 0 {
				note = joinReason(note, d.historicalNote(o, hist, v.kind != vAbsent))
			}
			if v.kind == vAbsent {
				if f := ent.field(o.field); hist.n > 0 && f != nil { // a set of historical values alone
					start = p.addChange(start, Change{Entity: name, Field: o.field, Op: o.kind.String(),
						Value: p.json(hist.last.kind, hist.last.text), After: p.fieldJSON(f), Historical: true})
				}
				continue
			}
			ok := ent.apply(o, v, e.setVersion(d, ent, o, ver), late)
			changed = changed || ok
			start = p.addChange(start, Change{Entity: name, Field: o.field, Op: o.kind.String(),
				Value: p.json(v.kind, v.text), After: p.fieldJSON(ent.field(o.field)), Lost: !ok && o.kind == opSet})
		}
		switch {
		case changed:
			p.changed(name, ent)
			if created && e.rows != nil {
				e.rows.entities++
			}
		case created: // every path of its operations absent: nothing to create, show or count
			delete(e.entities, name)
		}
	}
	return p.changes[start:len(p.changes):len(p.changes)], note
}

// unplacedNote says, for a decision's reason, that effect i was skipped
// because its entity template names a field the message lacks, when the
// message carries a value one of the effect's operations reads: that value
// went nowhere. It returns "" when the effect had nothing to do anyway (a
// route whose messages each name one of several entities).
func (d *Delivery) unplacedNote(i int, ef effect) string {
	carried := ""
	for _, o := range ef.ops { // none for a sql or forward effect
		if d.vals[o.src].kind != vAbsent {
			carried = d.route.paths[o.src].text
			break
		}
	}
	if carried == "" {
		return ""
	}
	for _, p := range ef.entity {
		if p.src < 0 {
			continue
		}
		if k := d.vals[p.src].kind; k == vAbsent || k == vNull {
			what := "absent"
			if k == vNull {
				what = "null"
			}
			return fmt.Sprintf("effects[%d] not applied: its entity %q names %s, %s, and %s went nowhere",
				i, d.route.Effects[i].Entity, d.route.paths[p.src].text, what, carried)
		}
	}
	return ""
}

// addChange appends c to the batch's changes, those of the message being
// projected beginning at start, and returns where they begin now.
func (p *pending) addChange(start int, c Change) int {
	if len(p.changes) == cap(p.changes) {
		// A full slab is left to the records that point into it, as the
		// sequences' is.
		n := len(p.changes) - start
		cs := make([]Change, n, max(16, 2*cap(p.changes)))
		copy(cs, p.changes[start:])
		p.changes, start = cs, 0
	}
	p.changes = append(p.changes, c)
	return start
}

// joinReason joins two parts of a decision's reason.
func joinReason(a, b string) string { return strings.TrimPrefix(a+"; "+b, "; ") }

// historical is what a set passed over: the historical values of its
// path (SetReadings).
type historical struct {
	n    int   // how many
	last value // the last of them
}

// historicalNote says, for a decision's reason, that set o passed over
// historical values h, and whether it set a current value instead.
func (d *Delivery) historicalNote(o op, h historical, current bool) string {
	what := "a historical value"
	if h.n > 1 {
		what = strconv.Itoa(h.n) + " historical values"
	}
	if current {
		return fmt.Sprintf("set %s: %s of %s not set, its current one is", o.field, what, d.route.paths[o.src].text)
	}
	return fmt.Sprintf("set %s: %s of %s not set, none current: the field is left as it was", o.field, what, d.route.paths[o.src].text)
}

// opValue is the value operation o takes from d: its path's value, or of
// a path d carries more than once or flagged historical (SetReadings), for a
// set the last that is not historical (absent when none is: hist is what
// it passed over), for an add the sum of every value, for a max or a min
// the highest or the lowest.
func (d *Delivery) opValue(o op) (v value, hist historical) {
	v = d.vals[o.src]
	if d.more == nil {
		return v, hist
	}
	if o.kind == opSet {
		return d.setValue(o)
	}
	var acc apd.Decimal
	n := 0
	for _, r := range *d.more {
		if r.path != o.src || r.v.kind != vNumber { // numbers, checked when placed; or absent
			continue
		}
		var x apd.Decimal
		if setNumber(&x, r.v.text) != nil {
			continue // placed values are numbers; unreachable
		}
		switch {
		case n == 0:
			acc.Set(&x)
		case o.kind == opAdd:
			if _, err := decimalCtx.Add(&acc, &acc, &x); err != nil {
				return v, hist
			}
		case o.kind == opMax && x.Cmp(&acc) > 0, o.kind == opMin && x.Cmp(&acc) < 0:
			acc.Set(&x)
		}
		n++
	}
	if n == 0 {
		return v, hist
	}
	return value{kind: vNumber, text: formatDecimal(&acc)}, hist
}

// setValue is opValue for a set: the last of its path's values that is
// not historical, and the historical ones it passed over.
func (d *Delivery) setValue(o op) (v value, hist historical) {
	v = d.vals[o.src]
	found := false
	for _, r := range *d.more {
		switch {
		case r.path != o.src:
		case r.hist:
			hist.n, hist.last = hist.n+1, r.v
		default:
			v, found = r.v, true
		}
	}
	if hist.n > 0 && !found {
		return value{}, hist
	}
	return v, hist
}

// json returns a message's value as JSON, in the batch's slab of values.
func (p *pending) json(k valueKind, text string) json.RawMessage {
	if k == vString {
		return p.rawOf(appendString(p.slab(len(text)+2), validText(text)))
	}
	return p.rawOf(append(p.slab(len(text)), text...))
}

// fieldJSON returns a field's value as JSON, in the batch's slab of values.
func (p *pending) fieldJSON(f *field) json.RawMessage {
	switch f.kind {
	case KindNumber:
		var r apd.Decimal
		r.Reduce(&f.num)
		if r.IsZero() {
			return p.rawOf(append(p.slab(1), '0'))
		}
		return p.rawOf(r.Append(p.slab(8), 'f'))
	case KindString:
		return p.rawOf(appendString(p.slab(len(f.str)+2), validText(f.str)))
	default:
		return p.rawOf(append(p.slab(len(f.str)), f.str...))
	}
}

// validText is s with each invalid UTF-8 byte replaced by U+FFFD, written
// as is: the form appendRaw writes again unchanged (appendString would
// escape an invalid byte as \ufffd, which reads back as U+FFFD).
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// slab returns the free end of the values' slab, with room for n bytes
// at least (a value may outgrow it; rawOf keeps what was written).
func (p *pending) slab(n int) []byte {
	if cap(p.raw)-len(p.raw) < n {
		p.raw = make([]byte, 0, max(4096, 2*n))
	}
	return p.raw[len(p.raw):]
}

// rawOf takes b, written at the free end of the slab, into it.
func (p *pending) rawOf(b []byte) json.RawMessage {
	if len(p.raw) < cap(p.raw) && len(b) > 0 && &b[0] == &p.raw[:len(p.raw)+1][len(p.raw)] {
		p.raw = p.raw[:len(p.raw)+len(b)]
	}
	return b[:len(b):len(b)]
}

// appendName appends the entity name the template renders from vals, or
// reports false when a field it names is absent or null.
func appendName(b []byte, parts []tmplPart, vals []value) ([]byte, bool) {
	for _, p := range parts {
		if p.src < 0 {
			b = append(b, p.lit...)
			continue
		}
		v := vals[p.src]
		if v.kind == vAbsent || v.kind == vNull {
			return b, false
		}
		b = append(b, v.text...)
	}
	return b, true
}

// keepString returns s for a field to keep: the field's current text when
// it is the same (a status set again), else a copy, since s is a substring
// of its whole payload.
func keepString(f *field, s string) string {
	if f != nil && f.kind != KindNumber && f.str == s {
		return f.str
	}
	return strings.Clone(s)
}

// setVersion is the version an unsequenced message's set writes in a
// group: past the field's, when that too is unsequenced. The batch read the
// entity's row under the store's concurrency control, so the set decided
// last is the one applied last; a key ordinal, which follows the deciding
// member's clock, would let a member whose clock runs ahead (or stepped
// forward) pin its older value against every set applied after it.
func (e *Engine) setVersion(d *Delivery, ent *entity, o op, ver Version) Version {
	if !e.groupOrder || d.seq >= 0 || o.kind != opSet {
		return ver
	}
	if f := ent.field(o.field); f != nil && f.version.Epoch == 0 && f.version.Sequence == 0 && f.version.Ordinal >= ver.Ordinal {
		ver.Ordinal = f.version.Ordinal + 1
	}
	return ver
}

// apply runs one operation; it reports whether the field changed. late
// says the message is older than its source's newest (Version.overwrittenBy).
func (ent *entity) apply(o op, v value, ver Version, late bool) bool {
	f := ent.field(o.field)
	if o.kind == opSet {
		if f != nil && !f.version.overwrittenBy(ver, late) {
			return false // a late old update never overwrites newer state
		}
		nf := field{version: ver}
		switch v.kind {
		case vNumber:
			nf.kind = KindNumber
			_ = setNumber(&nf.num, v.text) // decode validated numbers; unreachable
		case vString:
			nf.kind, nf.str = KindString, keepString(f, v.text)
		default:
			nf.kind, nf.str = KindRaw, keepString(f, v.text)
		}
		if f == nil {
			ent.add(o.field, nf)
		} else {
			*f = nf // in place: only the entity holds a field, and state copies it out
		}
		return true
	}
	var x apd.Decimal
	if setNumber(&x, v.text) != nil {
		return false // decode validated numbers; unreachable
	}
	if f == nil {
		ent.add(o.field, field{kind: KindNumber, num: x, version: ver})
		return true
	}
	if f.kind != KindNumber {
		*f = field{kind: KindNumber, num: x, version: ver}
		return true
	}
	switch o.kind {
	case opAdd:
		if _, err := decimalCtx.Add(&f.num, &f.num, &x); err != nil {
			return false
		}
	case opMax:
		if f.num.Cmp(&x) >= 0 {
			return false
		}
		f.num.Set(&x)
	case opMin:
		if f.num.Cmp(&x) <= 0 {
			return false
		}
		f.num.Set(&x)
	}
	if f.version.Less(ver) {
		f.version = ver
	}
	return true
}

// state returns the entity's state, its fields taken from the front of
// slab (a batch's states share one), and what is left of slab.
func (ent *entity) state(name string, slab Fields) (EntityState, Fields) {
	n := len(ent.fields)
	if len(slab) < n {
		slab = make(Fields, n)
	}
	st := EntityState{Name: name, Fields: slab[:n:n]}
	for i := range ent.fields {
		f := &ent.fields[i]
		fv := FieldValue{Kind: f.kind, Str: f.str, Version: f.version}
		if f.kind == KindNumber {
			fv.Num = formatDecimal(&f.num)
		}
		st.Fields[i] = Field{Name: f.name, FieldValue: fv}
	}
	return st, slab[n:]
}

func entityFromState(st EntityState) *entity {
	ent := &entity{fields: make([]namedField, 0, len(st.Fields))}
	for _, fv := range st.Fields {
		f := field{kind: fv.Kind, str: fv.Str, version: fv.Version}
		if fv.Kind == KindNumber {
			_ = setNumber(&f.num, fv.Num) // not a number: NaN, as SetString leaves it
		}
		ent.add(fv.Name, f)
	}
	return ent
}

// StateJSON renders entity states as `replayguard state --json` prints
// them: {"incident/7": {"casualties": 3, "status": "available"}}. Numbers
// are exact decimal JSON numbers.
func StateJSON(states []EntityState) map[string]map[string]json.RawMessage {
	out := make(map[string]map[string]json.RawMessage, len(states))
	for _, st := range states {
		m := make(map[string]json.RawMessage, len(st.Fields))
		for _, fv := range st.Fields {
			m[fv.Name] = fv.JSON()
		}
		out[st.Name] = m
	}
	return out
}

// JSON returns the field's value as JSON.
func (fv FieldValue) JSON() json.RawMessage {
	switch fv.Kind {
	case KindNumber:
		return json.RawMessage(fv.Num)
	case KindString:
		b, _ := json.Marshal(fv.Str)
		return b
	default:
		return json.RawMessage(fv.Str)
	}
}
