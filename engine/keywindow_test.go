package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"
)

func testKey(i uint64) Hash {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], i)
	return sha256.Sum256(b[:])
}

func TestKeyWindowEvictsTheOldestWhenFull(t *testing.T) {
	w := newKeyWindow(3, 10)
	for i := uint64(0); i < 4; i++ {
		if ord := w.insert(testKey(i), testKey(100+i), int64(i)); ord != 10+i {
			t.Fatalf("insert %d got ordinal %d, want %d", i, ord, 10+i)
		}
	}
	if _, ok := w.lookup(testKey(0)); ok {
		t.Fatal("the oldest key is still in a full window")
	}
	for i := uint64(1); i < 4; i++ {
		dg, ok := w.lookup(testKey(i))
		if !ok || dg != digest64(testKey(100+i)) {
			t.Fatalf("key %d: ok=%v digest=%x", i, ok, dg)
		}
	}
	if w.oldest() != 11 || w.next != 14 {
		t.Fatalf("oldest=%d next=%d, want 11 and 14", w.oldest(), w.next)
	}
}

// A window that reserves room for the entries a load brings holds them
// without growing, up to its limit, and finds each; past the limit it
// evicts as before.
func TestKeyWindowReservesRoomForALoad(t *testing.T) {
	w := newKeyWindow(5000, 0)
	w.reserve(3000)
	rings := map[*keySlot]bool{}
	for i := uint64(0); i < 3000; i++ {
		w.add(testKey(i), testKey(i), int64(i), i)
		rings[&w.ring[0]] = true
	}
	if len(rings) != 1 || len(w.ring) != 3000 {
		t.Fatalf("the window grew %d times to %d slots loading the 3000 entries it reserved room for", len(rings)-1, len(w.ring))
	}
	w.reserve(9000)
	if len(w.ring) != 5000 {
		t.Fatalf("a window of 5000 entries at most reserved %d slots", len(w.ring))
	}
	for i := uint64(3000); i < 6000; i++ {
		w.add(testKey(i), testKey(i), int64(i), i)
	}
	for i := uint64(0); i < 6000; i++ {
		if _, ok := w.lookup(testKey(i)); ok != (i >= 1000) {
			t.Fatalf("key %d present=%v; want the 5000 newest", i, ok)
		}
	}
}

func TestKeyWindowExpiresByAge(t *testing.T) {
	w := newKeyWindow(100, 0)
	for i := uint64(0); i < 10; i++ {
		w.insert(testKey(i), testKey(i), int64(i)*int64(time.Second))
	}
	if n := w.expire(int64(5 * time.Second)); n != 5 {
		t.Fatalf("expired %d, want 5", n)
	}
	for i := uint64(0); i < 10; i++ {
		if _, ok := w.lookup(testKey(i)); ok != (i >= 5) {
			t.Fatalf("key %d present=%v after expiry", i, ok)
		}
	}
}

// TestKeyWindowMatchesAMapModel runs random inserts, lookups and expiries
// against a map and a FIFO list. The seed is printed to replay a failure.
func TestKeyWindowMatchesAMapModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	limit := 1 + rng.IntN(3000)
	w := newKeyWindow(limit, 0)
	model := map[Hash]int64{}
	var fifo []Hash
	now := int64(0)
	for step := 0; step < 50000; step++ {
		now++
		k := testKey(uint64(rng.IntN(8000)))
		_, got := w.lookup(k)
		_, want := model[k]
		if got != want {
			t.Fatalf("seed %d step %d: lookup=%v model=%v", seed, step, got, want)
		}
		switch {
		case !want && rng.IntN(3) > 0:
			w.insert(k, k, now)
			model[k] = now
			fifo = append(fifo, k)
			if len(fifo) > limit {
				delete(model, fifo[0])
				fifo = fifo[1:]
			}
		case rng.IntN(500) == 0:
			cut := now - int64(rng.IntN(2000))
			w.expire(cut)
			for len(fifo) > 0 && model[fifo[0]] < cut {
				delete(model, fifo[0])
				fifo = fifo[1:]
			}
		}
		if w.len() != len(fifo) {
			t.Fatalf("seed %d step %d: len %d, model %d", seed, step, w.len(), len(fifo))
		}
	}
}
