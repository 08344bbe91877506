package engine

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The binary row format of a source's window and an entity's state, which
// every store keeps: a member decodes every row its batch touches, and JSON
// decoding was a third of its CPU. The first byte is rowFormat; a row that
// starts with '{' is the JSON the stores wrote before, and is still read.
//
//	source: rowFormat | str route | list(str) source | list(epoch) epochs |
//	        n str seen | bytes sparkplug (empty when nil; JSON before format 5,
//	        sparkplugcodec.go from it) | str feed
//	epoch:  str epoch | numeric byte | varint value, high, first |
//	        bitmap | varint floor | n (varint from, varint to) gaps
//	bitmap: uvarint words, then runs covering them: uvarint (length<<2 |
//	        kind), kind 0 a run of zero words, 1 of all-ones words, 2 of
//	        words that follow, 8 bytes little-endian each
//	        (format 1: n words, 8 bytes little-endian each)
//	entity: rowFormat4 | str name | list fields: str name | kind byte |
//	        str num | str str | varint epoch, sequence | uvarint ordinal |
//	        uvarint source (format 4)
//
// str is a uvarint length and the bytes; n is a uvarint count; list is a
// uvarint count plus one, 0 standing for nil, where JSON tells null from
// empty (the fields without omitempty).
//
// Format 2 writes the bitmap in runs: a source that sends in order has a
// window of all-ones words behind its high-water mark and zero words ahead
// of it, a few bytes where format 1 wrote sequence_span/8. Format 3 has the
// same layout, but its current epoch may have no bitmap at all (a run, with
// its Floor): a build that reads only format 2 would index a bitmap the
// window does not have, so the number keeps it out. Format 4 has the same
// source layout again, but an older epoch may keep its bitmap
// (EpochWindow.retire): a build that reads only format 3 would take that
// epoch's never-seen sequences for seen ones, so only a source row with
// such an epoch is written as format 4, every other source row as format
// 3. An entity row of format 4 gives each field the tag of the source that
// wrote it (Version.Source), which a set from another source is judged by;
// every entity row is written so. Format 5 has format 4's layout, but its
// Sparkplug session is the binary encoding of sparkplugcodec.go, each alias
// table written once however many births share it, not JSON (an edge's
// row with keep_epochs 64 was a megabyte of JSON, rewritten whole by every
// batch that touched the edge); a build that reads only format 4 would
// take it for JSON, so only a row with a Sparkplug session is written as
// format 5. Format 1 and 2 rows are still read, and so are the JSON
// sessions of rows before format 5.
const rowFormat = 5

// rowFormat4 is the format of every entity row, and of a source row
// without a Sparkplug session whose older epoch keeps its bitmap.
const rowFormat4 = 4

// rowFormat3 is the format of every source row but one whose older epoch
// keeps its bitmap.
const rowFormat3 = 3

// maxBitmapWords bounds the bitmap a row may claim (sequence_span 2^24),
// so that a corrupt row is a fault, not an allocation.
const maxBitmapWords = 1 << 18

// The kinds of a bitmap's runs.
const (
	runZeros = iota
	runOnes
	runWords
)

var errRowShort = errors.New("row ends early")

// MarshalBinary encodes the window as a row of the stores.
func (s *SourceState) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// AppendBinary appends the window's row encoding to b.
func (s *SourceState) AppendBinary(b []byte) ([]byte, error) {
	format := byte(rowFormat3)
	for i := 1; i < len(s.Epochs); i++ {
		if s.Epochs[i].Bitmap != nil {
			format = rowFormat4
		}
	}
	if s.Sparkplug != nil {
		format = rowFormat
	}
	b = append(b, format)
	b = appendStr(b, s.Route)
	b = appendList(b, s.Source == nil, len(s.Source))
	for _, p := range s.Source {
		b = appendStr(b, p)
	}
	b = appendList(b, s.Epochs == nil, len(s.Epochs))
	for i := range s.Epochs {
		b = s.Epochs[i].appendBinary(b)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Seen)))
	for _, e := range s.Seen {
		b = appendStr(b, e)
	}
	var spb []byte
	if s.Sparkplug != nil {
		spb = appendSparkplug(nil, s.Sparkplug)
	}
	b = append(binary.AppendUvarint(b, uint64(len(spb))), spb...)
	return appendStr(b, s.Feed), nil
}

func (w *EpochWindow) appendBinary(b []byte) []byte {
	b = appendStr(b, w.Epoch)
	b = append(b, boolByte(w.Numeric))
	b = binary.AppendVarint(b, w.Value)
	b = binary.AppendVarint(b, w.High)
	b = binary.AppendVarint(b, w.First)
	b = appendBitmap(b, w.Bitmap)
	b = binary.AppendVarint(b, w.Floor)
	b = binary.AppendUvarint(b, uint64(len(w.Gaps)))
	for _, g := range w.Gaps {
		b = binary.AppendVarint(b, g.From)
		b = binary.AppendVarint(b, g.To)
	}
	return b
}

func runKind(w uint64) int {
	switch w {
	case 0:
		return runZeros
	case math.MaxUint64:
		return runOnes
	}
	return runWords
}

func appendBitmap(b []byte, words []uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(words)))
	for i := 0; i < len(words); {
		kind := runKind(words[i])
		j := i + 1
		for j < len(words) && runKind(words[j]) == kind {
			j++
		}
		b = binary.AppendUvarint(b, uint64(j-i)<<2|uint64(kind))
		if kind == runWords {
			for _, w := range words[i:j] {
				b = binary.LittleEndian.AppendUint64(b, w)
			}
		}
		i = j
	}
	return b
}

// UnmarshalBinary decodes a stored row: the binary encoding,
// or the JSON written before it.
func (s *SourceState) UnmarshalBinary(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		*s = SourceState{}
		if err := json.Unmarshal(b, s); err != nil {
			return fmt.Errorf("decode a stored source row (JSON): %w", err)
		}
		return s.checkEpochs()
	}
	r := rowReader{b: b}
	r.format()
	out := SourceState{Route: r.str()}
	if n, ok := r.list(); ok {
		out.Source = make([]string, n)
		for i := range out.Source {
			out.Source[i] = r.str()
		}
	}
	if n, ok := r.list(); ok {
		out.Epochs = make([]EpochWindow, n)
		for i := range out.Epochs {
			out.Epochs[i] = r.epoch()
		}
	}
	if n := r.count(); n > 0 {
		out.Seen = make([]string, n)
		for i := range out.Seen {
			out.Seen[i] = r.str()
		}
	}
	if spb := r.bytes(); len(spb) > 0 && r.err == nil {
		if r.version < rowFormat {
			out.Sparkplug = new(SparkplugState)
			if err := json.Unmarshal(spb, out.Sparkplug); err != nil {
				return fmt.Errorf("decode a source row's Sparkplug session: %w", err)
			}
			out.Sparkplug.shareEqualTables()
		} else {
			sr := rowReader{b: spb, version: r.version}
			out.Sparkplug = sr.sparkplug()
			if err := sr.done("source row's Sparkplug session"); err != nil {
				return err
			}
		}
	}
	out.Feed = r.str()
	if err := r.done("source"); err != nil {
		return err
	}
	if err := out.checkEpochs(); err != nil {
		return err
	}
	*s = out
	return nil
}

// checkEpochs refuses a window no build writes: a high-water mark is -1
// before the first sequence and never lower (sequences are not negative).
// Deciding on a lower one would index the window's bitmap with a negative
// sequence.
func (s *SourceState) checkEpochs() error {
	for _, w := range s.Epochs {
		if w.High < -1 {
			return fmt.Errorf("decode a stored source row: epoch %q has high-water mark %d, below -1", w.Epoch, w.High)
		}
	}
	return nil
}

func (r *rowReader) epoch() EpochWindow {
	w := EpochWindow{Epoch: r.str(), Numeric: r.byte() != 0}
	w.Value, w.High, w.First = r.varint(), r.varint(), r.varint()
	if r.version == 1 {
		if n := r.count(); n > 0 && r.need(8*n) {
			w.Bitmap = make([]uint64, n)
			for i := range w.Bitmap {
				w.Bitmap[i] = binary.LittleEndian.Uint64(r.b[8*i:])
			}
			r.b = r.b[8*n:]
		}
	} else {
		w.Bitmap = r.bitmap()
	}
	w.Floor = r.varint()
	if n := r.count(); n > 0 {
		w.Gaps = make([]Range, n)
		for i := range w.Gaps {
			w.Gaps[i] = Range{From: r.varint(), To: r.varint()}
		}
	}
	return w
}

// MarshalBinary encodes the entity as a row of the stores.
func (e *EntityState) MarshalBinary() ([]byte, error) { return e.AppendBinary(nil) }

// AppendBinary appends the entity's row encoding to b.
func (e *EntityState) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, rowFormat4)
	b = appendStr(b, e.Name)
	b = appendList(b, e.Fields == nil, len(e.Fields))
	fields := e.Fields
	if !fields.sorted() { // one state, one row: a list built out of order is written sorted
		fields = slices.Clone(fields)
		slices.SortStableFunc(fields, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	}
	for i := range fields {
		f := &fields[i]
		b = appendStr(b, f.Name)
		b = append(b, byte(f.Kind))
		b = appendStr(b, f.Num)
		b = appendStr(b, f.Str)
		b = binary.AppendVarint(b, f.Version.Epoch)
		b = binary.AppendVarint(b, f.Version.Sequence)
		b = binary.AppendUvarint(b, f.Version.Ordinal)
		b = binary.AppendUvarint(b, f.Version.Source)
	}
	return b, nil
}

// UnmarshalBinary decodes a stored row: the binary encoding,
// or the JSON written before it.
func (e *EntityState) UnmarshalBinary(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		*e = EntityState{}
		if err := json.Unmarshal(b, e); err != nil {
			return fmt.Errorf("decode a stored entity row (JSON): %w", err)
		}
		return nil
	}
	r := rowReader{b: b}
	r.format()
	out := EntityState{Name: r.str()}
	if n, ok := r.list(); ok {
		out.Fields = make(Fields, 0, n)
		for range n {
			name := r.str()
			f := FieldValue{Kind: ValueKind(r.byte()), Num: r.str(), Str: r.str()}
			f.Version = Version{Epoch: r.varint(), Sequence: r.varint(), Ordinal: r.uvarint()}
			if r.version >= 4 {
				f.Version.Source = r.uvarint()
			}
			if r.err != nil {
				break
			}
			out.Fields.Set(name, f)
		}
	}
	if err := r.done("entity"); err != nil {
		return err
	}
	*e = out
	return nil
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendList(b []byte, isNil bool, n int) []byte {
	if isNil {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// rowReader reads a row; the first fault sticks, and every read after it
// returns a zero value, so a decoder checks once, at the end.
type rowReader struct {
	b       []byte
	err     error
	version byte // the row's format
}

// bitmap reads a format 2 bitmap; nil when it has no words.
func (r *rowReader) bitmap() []uint64 {
	n := r.uvarint()
	if n > maxBitmapWords {
		r.fail(fmt.Errorf("a bitmap of %d words", n))
		return nil
	}
	if n == 0 || r.err != nil {
		return nil
	}
	words := make([]uint64, n)
	for i := 0; i < len(words) && r.err == nil; {
		run := r.uvarint()
		length := run >> 2
		if length == 0 || length > uint64(len(words)-i) {
			r.fail(fmt.Errorf("a bitmap run of %d words at word %d of %d", length, i, n))
			break
		}
		end := i + int(length)
		switch run & 3 {
		case runZeros:
		case runOnes:
			for k := i; k < end; k++ {
				words[k] = math.MaxUint64
			}
		case runWords:
			if !r.need(8 * int(length)) {
				break
			}
			for k := i; k < end; k++ {
				words[k] = binary.LittleEndian.Uint64(r.b)
				r.b = r.b[8:]
			}
		default:
			r.fail(fmt.Errorf("a bitmap run of kind %d", run&3))
		}
		i = end
	}
	return words
}

func (r *rowReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *rowReader) need(n int) bool {
	if r.err == nil && n >= 0 && n <= len(r.b) {
		return true
	}
	r.fail(errRowShort)
	return false
}

func (r *rowReader) format() {
	if r.need(1) {
		if r.b[0] == 0 || r.b[0] > rowFormat {
			r.fail(fmt.Errorf("row format %d, not one this build reads (1 to %d): upgrade replayguard", r.b[0], rowFormat))
			return
		}
		r.version = r.b[0]
		r.b = r.b[1:]
	}
}

func (r *rowReader) byte() byte {
	if !r.need(1) {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *rowReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errRowShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rowReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errRowShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of items each at least one byte long: a count the
// rest of the row cannot hold is a fault, not an allocation.
func (r *rowReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) || n > math.MaxInt32 {
		r.fail(errRowShort)
		return 0
	}
	return int(n)
}

// list reads a count plus one; ok is false for nil.
func (r *rowReader) list() (n int, ok bool) {
	v := r.uvarint()
	if v == 0 || r.err != nil {
		return 0, false
	}
	if v-1 > uint64(len(r.b)) {
		r.fail(errRowShort)
		return 0, false
	}
	return int(v - 1), true
}

func (r *rowReader) bytes() []byte {
	n := r.count()
	if !r.need(n) {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *rowReader) str() string { return string(r.bytes()) }

func (r *rowReader) done(what string) error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the row", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("decode a stored %s row: %w", what, r.err)
	}
	return nil
}
