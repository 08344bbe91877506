package engine

import (
	"encoding/binary"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
)

// The binary encoding of an edge's Sparkplug session in a source row
// (format 5). Each alias table is written once, however many births and
// device births share it, and referred to by its index: an edge that is
// born again with the metrics it had keeps one table, not one per birth.
//
//	session: n tables | varint bdseq | byte flags (1 online, 2 recorded) |
//	         varint forgot, unrecorded | list births | list retired |
//	         n deaths (varint bdseq, hash digest)
//	table:   n aliases (uvarint alias, str name), ascending |
//	         n types (str name, uvarint datatype), ascending
//	birth:   str epoch | varint bdseq, rebirth | uvarint stamp | hash digest |
//	         time | uvarint position, high stamp, before, held |
//	         byte ended | hash death | uvarint node table |
//	         n devices, by name | varint high | time retired at
//	device:  str name | byte online | uvarint stamp, table, death, held |
//	         n earlier (uvarint stamp, table, held)
//	time:    byte 0 for the zero time, else 1, varint seconds, uvarint
//	         nanoseconds (UTC)
//
// A table never changes once made (SparkplugTable), so two births whose
// tables are the same maps share one entry.

// tableID identifies a table by its maps, for its one entry in a row.
type tableID struct{ aliases, types uintptr }

func idOf(t SparkplugTable) tableID {
	return tableID{reflect.ValueOf(t.Aliases).Pointer(), reflect.ValueOf(t.Types).Pointer()}
}

// spEncoder writes a session, numbering its tables.
type spEncoder struct {
	ids    map[tableID]uint64
	tables []SparkplugTable
}

func (e *spEncoder) ref(t SparkplugTable) uint64 {
	id := idOf(t)
	if i, ok := e.ids[id]; ok {
		return i
	}
	i := uint64(len(e.tables))
	e.ids[id] = i
	e.tables = append(e.tables, t)
	return i
}

// appendSparkplug appends the binary encoding of s.
func appendSparkplug(b []byte, s *SparkplugState) []byte {
	e := spEncoder{ids: map[tableID]uint64{}}
	var body []byte
	body = binary.AppendVarint(body, s.BdSeq)
	body = append(body, boolByte(s.Online)|boolByte(s.Recorded)<<1)
	body = binary.AppendVarint(body, s.Forgot)
	body = binary.AppendVarint(body, s.Unrecorded)
	for _, births := range [][]SparkplugBirth{s.Births, s.Retired} {
		body = appendList(body, births == nil, len(births))
		for i := range births {
			body = e.appendBirth(body, &births[i])
		}
	}
	body = binary.AppendUvarint(body, uint64(len(s.Deaths)))
	for _, d := range s.Deaths {
		body = binary.AppendVarint(body, d.BdSeq)
		body = append(body, d.Digest[:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(e.tables)))
	for _, t := range e.tables {
		b = appendTable(b, t)
	}
	return append(b, body...)
}

func (e *spEncoder) appendBirth(b []byte, x *SparkplugBirth) []byte {
	b = appendStr(b, x.Epoch)
	b = binary.AppendVarint(b, x.BdSeq)
	b = binary.AppendVarint(b, int64(x.Rebirth))
	b = binary.AppendUvarint(b, x.Stamp)
	b = append(b, x.Digest[:]...)
	b = appendTime(b, x.Time)
	for _, v := range []uint64{x.Position, x.HighStamp, x.Before, x.Held} {
		b = binary.AppendUvarint(b, v)
	}
	b = append(b, boolByte(x.Ended))
	b = append(b, x.Death[:]...)
	b = binary.AppendUvarint(b, e.ref(x.Node))
	b = binary.AppendUvarint(b, uint64(len(x.Devices)))
	for _, name := range slices.Sorted(maps.Keys(x.Devices)) {
		d := x.Devices[name]
		b = appendStr(b, name)
		b = append(b, boolByte(d.Online))
		for _, v := range []uint64{d.Stamp, e.ref(d.Table), d.Death, d.Held} {
			b = binary.AppendUvarint(b, v)
		}
		b = binary.AppendUvarint(b, uint64(len(d.Earlier)))
		for _, t := range d.Earlier {
			b = binary.AppendUvarint(b, t.Stamp)
			b = binary.AppendUvarint(b, e.ref(t.Table))
			b = binary.AppendUvarint(b, t.Held)
		}
	}
	b = binary.AppendVarint(b, x.High)
	return appendTime(b, x.RetiredAt)
}

func appendTable(b []byte, t SparkplugTable) []byte {
	b = binary.AppendUvarint(b, uint64(len(t.Aliases)))
	for _, a := range slices.Sorted(maps.Keys(t.Aliases)) {
		b = binary.AppendUvarint(b, a)
		b = appendStr(b, t.Aliases[a])
	}
	b = binary.AppendUvarint(b, uint64(len(t.Types)))
	for _, n := range slices.Sorted(maps.Keys(t.Types)) {
		b = appendStr(b, n)
		b = binary.AppendUvarint(b, uint64(t.Types[n]))
	}
	return b
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = binary.AppendVarint(append(b, 1), t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// sparkplug reads a session appendSparkplug wrote.
func (r *rowReader) sparkplug() *SparkplugState {
	tables := make([]SparkplugTable, r.count())
	for i := range tables {
		tables[i] = r.table()
	}
	s := &SparkplugState{BdSeq: r.varint()}
	flags := r.byte()
	s.Online, s.Recorded = flags&1 != 0, flags&2 != 0
	s.Forgot, s.Unrecorded = r.varint(), r.varint()
	for _, births := range []*[]SparkplugBirth{&s.Births, &s.Retired} {
		if n, ok := r.list(); ok {
			*births = make([]SparkplugBirth, n)
			for i := range *births {
				(*births)[i] = r.birth(tables)
			}
		}
	}
	if n := r.count(); n > 0 {
		s.Deaths = make([]SparkplugDeath, n)
		for i := range s.Deaths {
			s.Deaths[i] = SparkplugDeath{BdSeq: r.varint(), Digest: r.hash()}
		}
	}
	return s
}

func (r *rowReader) birth(tables []SparkplugTable) SparkplugBirth {
	x := SparkplugBirth{Epoch: r.str(), BdSeq: r.varint(), Rebirth: int(r.varint()), Stamp: r.uvarint(), Digest: r.hash(), Time: r.time()}
	x.Position, x.HighStamp, x.Before, x.Held = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
	x.Ended, x.Death = r.byte() != 0, r.hash()
	x.Node = r.tableRef(tables)
	if n := r.count(); n > 0 {
		x.Devices = make(map[string]SparkplugDevice, n)
		for range n {
			name := r.str()
			d := SparkplugDevice{Online: r.byte() != 0, Stamp: r.uvarint(), Table: r.tableRef(tables), Death: r.uvarint(), Held: r.uvarint()}
			if n := r.count(); n > 0 {
				d.Earlier = make([]SparkplugDeviceTable, n)
				for i := range d.Earlier {
					d.Earlier[i] = SparkplugDeviceTable{Stamp: r.uvarint(), Table: r.tableRef(tables), Held: r.uvarint()}
				}
			}
			x.Devices[name] = d
		}
	}
	x.High, x.RetiredAt = r.varint(), r.time()
	return x
}

func (r *rowReader) table() SparkplugTable {
	var t SparkplugTable
	if n := r.count(); n > 0 {
		t.Aliases = make(map[uint64]string, n)
		for range n {
			a := r.uvarint()
			t.Aliases[a] = r.str()
		}
	}
	if n := r.count(); n > 0 {
		t.Types = make(map[string]uint32, n)
		for range n {
			name := r.str()
			t.Types[name] = uint32(r.uvarint())
		}
	}
	return t
}

func (r *rowReader) tableRef(tables []SparkplugTable) SparkplugTable {
	i := r.uvarint()
	if i >= uint64(len(tables)) {
		r.fail(fmt.Errorf("alias table %d of %d", i, len(tables)))
		return SparkplugTable{}
	}
	return tables[i]
}

func (r *rowReader) hash() Hash {
	var h Hash
	if r.need(len(h)) {
		copy(h[:], r.b)
		r.b = r.b[len(h):]
	}
	return h
}

func (r *rowReader) time() time.Time {
	if r.byte() == 0 {
		return time.Time{}
	}
	sec, nsec := r.varint(), r.uvarint()
	if nsec >= 1e9 {
		r.fail(fmt.Errorf("a time of %d nanoseconds past its second", nsec))
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// shareEqualTables makes the births and devices of a session decoded from
// JSON (a row of format 4 or before, a table per birth) share the tables
// they hold equal, so that the row is written back with each table once.
func (s *SparkplugState) shareEqualTables() {
	var distinct []SparkplugTable
	s.eachTable(func(t *SparkplugTable) bool {
		if i := slices.IndexFunc(distinct, t.Equal); i >= 0 {
			*t = distinct[i]
		} else {
			distinct = append(distinct, *t)
		}
		return true
	})
}

// SharedTable returns a table s keeps that equals t, or t: a birth that
// gives the aliases and datatypes an earlier one gave shares its table,
// which the edge's row then stores once (tables never change once made).
func (s *SparkplugState) SharedTable(t SparkplugTable) SparkplugTable {
	if s == nil {
		return t
	}
	found := t
	s.eachTable(func(u *SparkplugTable) bool {
		if u.Equal(t) {
			found = *u
			return false
		}
		return true
	})
	return found
}

// Equal says whether t and u give the same aliases and datatypes.
func (t SparkplugTable) Equal(u SparkplugTable) bool {
	return maps.Equal(t.Aliases, u.Aliases) && maps.Equal(t.Types, u.Types)
}

// eachTable calls fn with every table of s's births, kept and retired,
// and of their devices, until fn returns false; fn may replace the table
// (s is then changed in place: only a state no other holds, one just
// decoded).
func (s *SparkplugState) eachTable(fn func(t *SparkplugTable) bool) {
	for _, births := range [][]SparkplugBirth{s.Births, s.Retired} {
		for i := range births {
			b := &births[i]
			if !fn(&b.Node) {
				return
			}
			for name, d := range b.Devices {
				id := idOf(d.Table)
				more := fn(&d.Table)
				if idOf(d.Table) != id {
					b.Devices[name] = d
				}
				for j := 0; more && j < len(d.Earlier); j++ {
					more = fn(&d.Earlier[j].Table) // in place: Earlier is the map value's
				}
				if !more {
					return
				}
			}
		}
	}
}
