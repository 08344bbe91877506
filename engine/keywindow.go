package engine

import (
	"encoding/binary"
	"math/bits"
)

// keyWindow holds the keys of recently applied messages, bounded by count
// and age, oldest evicted first.
//
// To meet ~48 bytes per entry at a million entries it keeps, per key, the
// first 128 bits of the SHA-256 key and the first 64 bits of the content
// digest, not the full 64 bytes. A false key match needs a 128-bit
// collision (about n/2^128 per lookup: 3e-33 at a million keys). A false
// "same digest" needs a 64-bit collision between two different contents of
// the same key, and a mismatch is never dropped: it is a conflict, held in
// quarantine. The store keeps the full key and digest; this is their index.
//
// Entries live in a ring in insertion order (so eviction is a pop from the
// head); an open-addressing table with linear probing maps a key to its
// ring position, with a 32-bit tag beside the position so most misses never
// touch the ring.
type keyWindow struct {
	ring  []keySlot // capacity grows by doubling up to max
	head  int       // ring index of the oldest entry
	n     int       // live entries
	next  uint64    // the ordinal the next insert gets
	max   int
	table []uint64 // 0 = empty, else tag<<32 | (ring index + 1)
	mask  uint64
}

type keySlot struct {
	k0, k1 uint64 // first 128 bits of the key
	dg     uint64 // first 64 bits of the digest
	t      int64  // unix nanoseconds when applied, by the engine's key clock (keyclock.go)
	ord    uint64 // insertion ordinal, the entry's store key
}

func newKeyWindow(limit int, next uint64) *keyWindow {
	limit = max(limit, 1)
	w := &keyWindow{max: limit, next: next}
	w.resize(min(limit, 1024))
	return w
}

// reserve makes room for n entries at once, where a load knows how many
// come: grown by doubling, a million keys were placed about twice over.
func (w *keyWindow) reserve(n int) {
	if n = min(n, w.max); n > len(w.ring) {
		w.resize(n)
	}
}

func fingerprint(h Hash) (k0, k1 uint64) {
	return binary.LittleEndian.Uint64(h[0:8]), binary.LittleEndian.Uint64(h[8:16])
}

func digest64(h Hash) uint64 { return binary.LittleEndian.Uint64(h[0:8]) }

// lookup returns the stored digest prefix of key.
func (w *keyWindow) lookup(key Hash) (dg uint64, ok bool) {
	k0, k1 := fingerprint(key)
	tag := k1 >> 32
	for i := k0 & w.mask; ; i = (i + 1) & w.mask {
		s := w.table[i]
		if s == 0 {
			return 0, false
		}
		if s>>32 == tag {
			e := &w.ring[uint32(s)-1]
			if e.k0 == k0 && e.k1 == k1 {
				return e.dg, true
			}
		}
	}
}

// insert appends a key with the next ordinal; the caller has checked it is
// absent. It returns the entry's ordinal.
func (w *keyWindow) insert(key, digest Hash, t int64) uint64 {
	ord := w.next
	w.next++
	w.add(key, digest, t, ord)
	return ord
}

// add appends a key with a given ordinal (loading from the store).
func (w *keyWindow) add(key, digest Hash, t int64, ord uint64) {
	if w.n == w.max {
		w.evictOldest()
	}
	if w.n == len(w.ring) {
		w.resize(min(2*len(w.ring), w.max))
	}
	pos := (w.head + w.n) % len(w.ring)
	k0, k1 := fingerprint(key)
	w.ring[pos] = keySlot{k0: k0, k1: k1, dg: digest64(digest), t: t, ord: ord}
	w.n++
	w.place(k0, k1>>32<<32|uint64(pos+1))
}

func (w *keyWindow) place(k0, slot uint64) {
	i := k0 & w.mask
	for w.table[i] != 0 {
		i = (i + 1) & w.mask
	}
	w.table[i] = slot
}

// expire evicts entries applied before cutoff; it returns how many.
func (w *keyWindow) expire(cutoff int64) int {
	n := 0
	for w.n > 0 && w.ring[w.head].t < cutoff {
		w.evictOldest()
		n++
	}
	return n
}

func (w *keyWindow) evictOldest() {
	e := &w.ring[w.head]
	want := e.k1>>32<<32 | uint64(w.head+1)
	i := e.k0 & w.mask
	for w.table[i] != want {
		i = (i + 1) & w.mask
	}
	w.remove(i)
	w.head = (w.head + 1) % len(w.ring)
	w.n--
}

// remove deletes table slot i with backward-shift deletion, so probe
// sequences stay unbroken without tombstones.
func (w *keyWindow) remove(i uint64) {
	for {
		w.table[i] = 0
		j := i
		for {
			j = (j + 1) & w.mask
			s := w.table[j]
			if s == 0 {
				return
			}
			home := w.ring[uint32(s)-1].k0 & w.mask
			// move s into the hole at i unless its home lies cyclically in (i, j]
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				w.table[i] = s
				i = j
				break
			}
		}
	}
}

// resize moves the ring to a new capacity and rebuilds the table at a load
// factor of at most one half.
func (w *keyWindow) resize(capacity int) {
	ring := make([]keySlot, capacity)
	for i := 0; i < w.n; i++ {
		ring[i] = w.ring[(w.head+i)%len(w.ring)]
	}
	w.ring, w.head = ring, 0
	size := uint64(1) << bits.Len(uint(2*capacity-1))
	w.table, w.mask = make([]uint64, size), size-1
	for i := 0; i < w.n; i++ {
		w.place(ring[i].k0, ring[i].k1>>32<<32|uint64(i+1))
	}
}

// oldest is the ordinal of the oldest live entry, or next when empty: every
// stored entry below it may be deleted.
func (w *keyWindow) oldest() uint64 {
	if w.n == 0 {
		return w.next
	}
	return w.ring[w.head].ord
}

// oldestTime is when the oldest live entry was applied, or 0 when empty.
func (w *keyWindow) oldestTime() int64 {
	if w.n == 0 {
		return 0
	}
	return w.ring[w.head].t
}

func (w *keyWindow) len() int { return w.n }
