package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Audit records are the bulk of a store, so they get a compact binary form
// instead of JSON: less than half the size (about 240 bytes against 540 for
// a typical record) and several times faster both ways.
// It round-trips every field exactly (nil and empty Source stay apart, since
// the chain hash tells them apart) except Time's location: records come back
// in UTC, which the chain hash does not see.
//
//	format (1) | flags (1) | varint unix seconds | uvarint nanoseconds |
//	uvarint ref | [varint sequence] | [varint gap from | varint gap to] | route | topic | epoch | id | outcome |
//	reason | broker | [operator] | uvarint len(source)+1 (0: nil) | source parts... |
//	key | digest | prev | hash
//
// Strings are uvarint length + bytes. Key, digest, prev and hash are 32 raw
// bytes (their flag set), or an empty string for a zero key or digest (a
// malformed message has none). A store written when the hashes were text
// may hold one as a string of 64 lowercase hex digits; it decodes the same.
// The operator of a release or discard is there only with flagOperator, so
// records written before it existed decode as they were, with none.
//
// A record with a feed or effects is format 2: format 1 followed by feed,
// uvarint len(effects) and, for each, entity | field | op | value | after |
// lost (1 byte, 0 or 1). Records with neither stay format 1, byte for byte.
// A record with a connection time (the first delivery of a connection) is
// format 3: format 2 followed by varint unix seconds | uvarint nanoseconds
// of it.
const (
	auditFormat          = 1
	auditFormatEffects   = 2
	auditFormatConnected = 3
)

const (
	flagSequence = 1 << iota
	flagDup
	flagKeyRaw
	flagDigestRaw
	flagPrevRaw
	flagHashRaw
	flagGap
	flagOperator
)

var errCorruptAudit = errors.New("embedded: corrupt audit record")

// auditChunkBytes bounds a chunk of audit records to one 4 KiB page: a
// batch's records go in as a few dozen chunks instead of one bbolt item
// each. A larger record is a chunk of its own.
const auditChunkBytes = 4000

// auditChunk is consecutive records of one batch: each uvarint length +
// record, stored under the position of the first.
type auditChunk struct {
	first uint64
	data  []byte
}

// chunkAudit encodes recs, whose positions are consecutive, into chunks.
// Each record is written in place in the batch's one buffer, sized for
// them all (auditBytes), behind room for its length.
func chunkAudit(recs []engine.AuditRecord) []auditChunk {
	size := auditBytes(recs)
	buf := make([]byte, 0, size)
	chunks := make([]auditChunk, 0, size/auditChunkBytes+1)
	starts := make([]int, 0, cap(chunks))
	for i := range recs {
		at := len(buf)
		buf = append(buf, 0, 0) // its length: two bytes, unless moved
		buf = appendAudit(buf, &recs[i])
		size := len(buf) - at - 2
		n := len(chunks)
		if n == 0 || at-starts[n-1]+binary.MaxVarintLen32+size > auditChunkBytes {
			chunks = append(chunks, auditChunk{first: recs[i].Position})
			starts = append(starts, at)
		}
		buf = putLength(buf, at, size)
	}
	for i := range chunks {
		end := len(buf)
		if i+1 < len(chunks) {
			end = starts[i+1]
		}
		chunks[i].data = buf[starts[i]:end:end]
	}
	return chunks
}

// putLength writes size, the length of the record after buf[at:at+2], as
// a uvarint at buf[at], moving the record when it takes other than those
// two bytes.
func putLength(buf []byte, at, size int) []byte {
	var l [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(l[:], uint64(size))
	switch {
	case w < 2:
		copy(buf[at+w:], buf[at+2:])
		buf = buf[:len(buf)-(2-w)]
	case w > 2:
		buf = append(buf, l[:w-2]...) // room for the longer length
		copy(buf[at+w:], buf[at+2:len(buf)-(w-2)])
	}
	copy(buf[at:], l[:w])
	return buf
}

// auditBytes is about what recs take encoded, a little more as a rule:
// their strings, and room for the rest.
func auditBytes(recs []engine.AuditRecord) int {
	n := 0
	for i := range recs {
		r := &recs[i]
		n += auditFixedBytes + len(r.Route) + len(r.Topic) + len(r.Epoch) + len(r.ID) + len(r.Outcome) +
			len(r.Reason) + len(r.Broker) + len(r.Operator) + len(r.Feed)
		for _, s := range r.Source {
			n += 2 + len(s)
		}
		for j := range r.Effects {
			c := &r.Effects[j]
			n += 16 + len(c.Entity) + len(c.Field) + len(c.Op) + len(c.Value) + len(c.After)
		}
	}
	return n
}

// auditFixedBytes bounds what a record takes besides its strings: its
// length, format and flags, times, ref, sequence and gap, the strings'
// lengths and the four hashes.
const auditFixedBytes = 3 + 2 + 2*(binary.MaxVarintLen64+5) + 4*binary.MaxVarintLen64 + 12*2 + 4*32

// decodeChunkFrom decodes the records of a chunk stored under k whose
// position is at least from, and appends them to dst.
func decodeChunkFrom(dst []engine.AuditRecord, k, v []byte, from uint64) ([]engine.AuditRecord, error) {
	if len(k) != 8 {
		return dst, fmt.Errorf("%w: chunk key %x", errCorruptAudit, k)
	}
	for pos := binary.BigEndian.Uint64(k); len(v) > 0; pos++ {
		n, w := binary.Uvarint(v)
		if w <= 0 || n > uint64(len(v)-w) {
			return dst, fmt.Errorf("%w: at position %d", errCorruptAudit, pos)
		}
		rec := v[w : w+int(n)]
		v = v[w+int(n):]
		if pos < from {
			continue
		}
		r, err := decodeAudit(pos, rec)
		if err != nil {
			return dst, fmt.Errorf("%w: at position %d", err, pos)
		}
		dst = append(dst, r)
	}
	return dst, nil
}

func appendAudit(dst []byte, r *engine.AuditRecord) []byte {
	hashes := [4]*engine.Hash{&r.Key, &r.Digest, &r.Prev, &r.Hash}
	var flags byte
	if r.Sequence != nil {
		flags |= flagSequence
	}
	if r.Dup {
		flags |= flagDup
	}
	if r.Gap != nil {
		flags |= flagGap
	}
	if r.Operator != "" {
		flags |= flagOperator
	}
	for i, h := range hashes {
		if i >= 2 || !h.IsZero() { // a zero key or digest stays an empty string, as ever
			flags |= flagKeyRaw << i
		}
	}
	format := byte(auditFormat)
	switch {
	case !r.Connected.IsZero():
		format = auditFormatConnected
	case len(r.Effects) > 0 || r.Feed != "":
		format = auditFormatEffects
	}
	dst = append(dst, format, flags)
	dst = binary.AppendVarint(dst, r.Time.Unix())
	dst = binary.AppendUvarint(dst, uint64(r.Time.Nanosecond()))
	dst = binary.AppendUvarint(dst, r.Ref)
	if r.Sequence != nil {
		dst = binary.AppendVarint(dst, *r.Sequence)
	}
	if r.Gap != nil {
		dst = binary.AppendVarint(dst, r.Gap.From)
		dst = binary.AppendVarint(dst, r.Gap.To)
	}
	for _, s := range [...]string{r.Route, r.Topic, r.Epoch, r.ID, r.Outcome, r.Reason, r.Broker} {
		dst = appendString(dst, s)
	}
	if r.Operator != "" {
		dst = appendString(dst, r.Operator)
	}
	if r.Source == nil {
		dst = append(dst, 0)
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(r.Source))+1)
	}
	for _, s := range r.Source {
		dst = appendString(dst, s)
	}
	for i, h := range hashes {
		if flags&(flagKeyRaw<<i) != 0 {
			dst = append(dst, h[:]...)
		} else {
			dst = append(dst, 0) // the empty string
		}
	}
	if format >= auditFormatEffects {
		dst = appendString(dst, r.Feed)
		dst = binary.AppendUvarint(dst, uint64(len(r.Effects)))
		for i := range r.Effects {
			c := &r.Effects[i]
			for _, s := range [...]string{c.Entity, c.Field, c.Op} {
				dst = appendString(dst, s)
			}
			dst = appendBytes(dst, c.Value)
			dst = appendBytes(dst, c.After)
			mark := byte(0) // 1 lost, 2 historical
			switch {
			case c.Lost:
				mark = 1
			case c.Historical:
				mark = 2
			}
			dst = append(dst, mark)
		}
	}
	if format == auditFormatConnected {
		dst = binary.AppendVarint(dst, r.Connected.Unix())
		dst = binary.AppendUvarint(dst, uint64(r.Connected.Nanosecond()))
	}
	return dst
}

func decodeAudit(pos uint64, v []byte) (engine.AuditRecord, error) {
	r := engine.AuditRecord{Position: pos}
	if len(v) < 2 || v[0] < auditFormat || v[0] > auditFormatConnected {
		return r, errCorruptAudit
	}
	flags := v[1]
	d := decoder{b: v[2:]}
	sec, nsec := d.varint(), d.uvarint()
	if nsec >= 1e9 {
		d.fail()
	}
	r.Time = time.Unix(sec, int64(nsec)).UTC()
	r.Ref = d.uvarint()
	if flags&flagSequence != 0 {
		seq := d.varint()
		r.Sequence = &seq
	}
	if flags&flagGap != 0 {
		r.Gap = &engine.Range{From: d.varint(), To: d.varint()}
	}
	r.Dup = flags&flagDup != 0
	for _, s := range [...]*string{&r.Route, &r.Topic, &r.Epoch, &r.ID, &r.Outcome, &r.Reason, &r.Broker} {
		*s = d.str()
	}
	if flags&flagOperator != 0 {
		if r.Operator = d.str(); r.Operator == "" {
			d.fail() // the encoder sets the flag only for a name
		}
	}
	if n := d.uvarint(); n > 0 && n-1 <= uint64(len(d.b)) { // each part takes a byte at least
		r.Source = make([]string, n-1)
		for i := range r.Source {
			r.Source[i] = d.str()
		}
	} else if n > 0 {
		d.fail()
	}
	for i, h := range [...]*engine.Hash{&r.Key, &r.Digest, &r.Prev, &r.Hash} {
		if flags&(flagKeyRaw<<i) != 0 {
			copy(h[:], d.raw(len(h)))
		} else if s := d.str(); s != "" && h.UnmarshalText([]byte(s)) != nil {
			d.fail() // text the hash type cannot hold: not a record the engine wrote
		}
	}
	if v[0] >= auditFormatEffects {
		r.Feed = d.str()
		n := d.uvarint()
		switch {
		case n == 0 && r.Feed == "" && v[0] == auditFormatEffects: // the encoder writes format 2 only for one of them
			d.fail()
		case n > uint64(len(d.b)): // each effect takes a byte at least
			d.fail()
			n = 0
		}
		if n > 0 {
			r.Effects = make([]engine.Change, n)
		}
		for i := range r.Effects {
			c := &r.Effects[i]
			c.Entity, c.Field, c.Op = d.str(), d.str(), d.str()
			c.Value, c.After = d.bytes(), d.bytes()
			switch d.raw(1)[0] {
			case 0:
			case 1:
				c.Lost = true
			case 2:
				c.Historical = true
			default:
				d.fail()
			}
		}
		if d.err != nil {
			r.Effects = nil
		}
	}
	if v[0] == auditFormatConnected {
		sec, nsec := d.varint(), d.uvarint()
		if nsec >= 1e9 {
			d.fail()
		}
		if r.Connected = time.Unix(sec, int64(nsec)).UTC(); r.Connected.IsZero() {
			d.fail() // the encoder writes format 3 only for a connection time
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return r, errCorruptAudit
	}
	return r, nil
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decoder reads what appendAudit wrote; after the first error every read
// returns a zero value and err stays set.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	d.err, d.b = errCorruptAudit, nil
}

func (d *decoder) uvarint() uint64 {
	n, w := binary.Uvarint(d.b)
	if w <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[w:]
	return n
}

func (d *decoder) varint() int64 {
	n, w := binary.Varint(d.b)
	if w <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[w:]
	return n
}

func (d *decoder) raw(n int) []byte {
	if n > len(d.b) {
		d.fail()
		return make([]byte, n)
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	return string(d.raw(int(n)))
}

// bytes reads what appendBytes wrote, as a copy (a value read from the
// store is only valid inside its transaction), or nil when it is empty.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	return append([]byte(nil), d.raw(int(n))...)
}
