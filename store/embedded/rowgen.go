package embedded

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"slices"
)

// rowGen is rows of the log, the newest value of each row by kind and
// key. A fleet's log holds hundreds of thousands of rows: kept as strings
// and slices in maps, each row was two objects and two pointers that the
// collector followed at every cycle. Here the rows are appended, in the
// chunk encoding, to one byte slice, and found through a table of their
// offsets, neither of which holds a pointer. A row set again is appended
// anew, so the bytes a read was given never change.
type rowGen struct {
	arena []byte
	// slots is an open-addressing table: 0 is empty, else the low
	// slotOffsetBits are the row's offset in arena plus one and the
	// others the top bits of its hash.
	slots []uint64
	n     int // the distinct rows
	seed  maphash.Seed
}

const (
	slotOffsetBits = 40
	slotOffsetMask = 1<<slotOffsetBits - 1
	firstSlots     = 1 << 10
	firstArena     = 64 << 10
)

func newRowGen() *rowGen {
	return &rowGen{slots: make([]uint64, firstSlots), seed: maphash.MakeSeed()}
}

func (g *rowGen) len() int { return g.n }

// hash is row key of kind's hash: maphash.Bytes of a key is maphash.String
// of the same bytes.
func (g *rowGen) hash(kind byte, key string) uint64 {
	return maphash.String(g.seed, key) ^ uint64(kind)*0x9e3779b97f4a7c15
}

func (g *rowGen) hashBytes(kind byte, key []byte) uint64 {
	return maphash.Bytes(g.seed, key) ^ uint64(kind)*0x9e3779b97f4a7c15
}

// find returns the slot of row key of kind, whose hash is h: the one
// holding it, or the empty one where it goes.
func (g *rowGen) find(h uint64, kind byte, key string) (i int, found bool) {
	tag, mask := h>>slotOffsetBits, len(g.slots)-1
	for i = int(h) & mask; g.slots[i] != 0; i = (i + 1) & mask {
		if g.slots[i]>>slotOffsetBits != tag {
			continue
		}
		k, rk, _ := g.row(int(g.slots[i]&slotOffsetMask) - 1)
		if k == kind && string(rk) == key {
			return i, true
		}
	}
	return i, false
}

// get returns row key of kind; false when g holds none. The value is g's,
// never to be changed.
func (g *rowGen) get(kind byte, key string) ([]byte, bool) {
	i, ok := g.find(g.hash(kind, key), kind, key)
	if !ok {
		return nil, false
	}
	_, _, v := g.row(int(g.slots[i]&slotOffsetMask) - 1)
	return v, true
}

// set makes value the newest value of row key of kind.
func (g *rowGen) set(kind byte, key string, value []byte) {
	if 4*(g.n+1) > 3*len(g.slots) {
		g.grow()
	}
	off, h := len(g.arena), g.hash(kind, key)
	if need := 1 + 2*binary.MaxVarintLen64 + len(key) + len(value); cap(g.arena)-off < need {
		// Doubled: append grows a large slice by a quarter, copying all
		// of it each time (five times the bytes, reading a log back).
		g.arena = append(make([]byte, 0, max(2*cap(g.arena), off+need, firstArena)), g.arena...)
	}
	g.arena = appendRow(g.arena, kind, key, value)
	i, found := g.find(h, kind, key)
	if !found {
		g.n++
	}
	g.slots[i] = h>>slotOffsetBits<<slotOffsetBits | uint64(off+1)
}

// grow doubles the table, placing each row again.
func (g *rowGen) grow() {
	old := g.slots
	g.slots = make([]uint64, 2*len(old))
	mask := len(g.slots) - 1
	for _, s := range old {
		if s == 0 {
			continue
		}
		kind, key, _ := g.row(int(s&slotOffsetMask) - 1)
		i := int(g.hashBytes(kind, key)) & mask
		for g.slots[i] != 0 {
			i = (i + 1) & mask
		}
		g.slots[i] = s
	}
}

// appendRow appends a row in the chunk encoding.
func appendRow(dst []byte, kind byte, key string, value []byte) []byte {
	dst = append(dst, kind)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...)
}

// row decodes the row at off, which g wrote itself; key and value are
// capped, so that an append to them copies.
func (g *rowGen) row(off int) (kind byte, key, value []byte) {
	n, w := uvarint(g.arena[off+1:])
	b := g.arena[off+1+w:]
	key, b = b[:n:n], b[n:]
	n, w = uvarint(b)
	return g.arena[off], key, b[w : w+n : w+n]
}

// uvarint is binary.Uvarint of a length g wrote, one byte below 128.
func uvarint(b []byte) (n, w int) {
	if b[0] < 0x80 {
		return int(b[0]), 1
	}
	u, w := binary.Uvarint(b)
	return int(u), w
}

// offsets returns the offsets of g's rows of kind (every kind when kind
// is 0), in no order.
func (g *rowGen) offsets(kind byte) []int {
	offs := make([]int, 0, g.n)
	for _, s := range g.slots {
		if s == 0 {
			continue
		}
		off := int(s&slotOffsetMask) - 1
		if kind == 0 || g.arena[off] == kind {
			offs = append(offs, off)
		}
	}
	return offs
}

// sortedOffsets returns the offsets of all g's rows in order of kind and
// key.
func (g *rowGen) sortedOffsets() []int {
	type row struct {
		key []byte
		off int
	}
	rows := make([]row, 0, g.n)
	for _, off := range g.offsets(0) {
		_, key, _ := g.row(off)
		rows = append(rows, row{key, off})
	}
	slices.SortFunc(rows, func(a, b row) int {
		if ka, kb := g.arena[a.off], g.arena[b.off]; ka != kb {
			return int(ka) - int(kb)
		}
		return bytes.Compare(a.key, b.key)
	})
	offs := make([]int, len(rows))
	for i, r := range rows {
		offs[i] = r.off
	}
	return offs
}
