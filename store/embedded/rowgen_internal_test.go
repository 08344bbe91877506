package embedded

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestARowGenHoldsTheNewestValueOfEachRow sets rows of both kinds, some
// many times, across several doublings of the table, against a map.
func TestARowGenHoldsTheNewestValueOfEachRow(t *testing.T) {
	g := newRowGen()
	want := map[rowID][]byte{}
	given := map[string][]byte{} // values get returned, with what they held then
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20_000 {
		kind := byte(kindSource)
		if rng.IntN(2) == 0 {
			kind = kindEntity
		}
		key := fmt.Sprintf("m%d", rng.IntN(6_000)) // both kinds share keys
		if i%97 == 0 {
			key = strings.Repeat("k", 200+i%300) // lengths past one varint byte
		}
		value := fmt.Appendf(nil, "%c/%s/%d", kind, key, i)
		if i%89 == 0 {
			value = bytes.Repeat(value, 20)
		}
		g.set(kind, key, value)
		want[rowID{kind, key}] = value
		if v, ok := g.get(kind, key); !ok || !bytes.Equal(v, value) {
			t.Fatalf("get(%c, %q) after set = %q, %v; want %q", kind, key, v, ok, value)
		}
		if i%1000 == 0 {
			v, _ := g.get(kind, key)
			given[string(v)] = v
		}
	}
	if g.len() != len(want) {
		t.Fatalf("len = %d, want %d", g.len(), len(want))
	}
	for id, value := range want {
		if v, ok := g.get(id.kind, id.key); !ok || !bytes.Equal(v, value) {
			t.Fatalf("get(%c, %q) = %q, %v; want %q", id.kind, id.key, v, ok, value)
		}
	}
	for s, v := range given {
		if string(v) != s {
			t.Fatalf("a value returned earlier now holds %q, was %q", v, s)
		}
		if cap(v) != len(v) {
			t.Fatalf("a value returned has room to append in place: len %d, cap %d", len(v), cap(v))
		}
	}
	if v, ok := g.get(kindEntity, "absent"); ok || v != nil {
		t.Fatalf("get of an absent row = %q, %v", v, ok)
	}
	checkOrder(t, g, want)
}

// checkOrder checks that g's sorted offsets name each row of want once, in
// order of kind and key.
func checkOrder(t *testing.T, g *rowGen, want map[rowID][]byte) {
	t.Helper()
	ids := slices.SortedFunc(maps.Keys(want), func(a, b rowID) int {
		return compareRows(loggedRow{kind: a.kind, key: a.key}, loggedRow{kind: b.kind, key: b.key})
	})
	offs := g.sortedOffsets()
	if len(offs) != len(ids) {
		t.Fatalf("%d sorted offsets, want %d", len(offs), len(ids))
	}
	for i, off := range offs {
		kind, key, value := g.row(off)
		if kind != ids[i].kind || string(key) != ids[i].key || !bytes.Equal(value, want[ids[i]]) {
			t.Fatalf("row %d in order = %c %q %q, want %c %q %q", i, kind, key, value, ids[i].kind, ids[i].key, want[ids[i]])
		}
	}
	for _, kind := range []byte{kindSource, kindEntity} {
		n := 0
		for id := range want {
			if id.kind == kind {
				n++
			}
		}
		if got := len(g.offsets(kind)); got != n {
			t.Fatalf("%d offsets of kind %c, want %d", got, kind, n)
		}
	}
}
