package redis

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

func testPruneTTL(t *testing.T, g *group) {
	a := g.must(t, "a", func(o *Options) { o.TTL = 300 * time.Millisecond })
	b := batchAfter(t, a, 5)
	if err := a.Commit(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if n, c := g.do(t, "ZCARD", a.k.keyIndex), g.do(t, "GET", a.k.keyCount); n != int64(1) || c != "5" {
		t.Fatalf("index holds %v sets of %v keys, want 1 of 5", n, c)
	}
	time.Sleep(400 * time.Millisecond)
	if n := g.do(t, "EXISTS", a.k.key(b.Keys[0].Key)); n != int64(0) {
		t.Fatal("a key outlived its ttl")
	}
	expired, trimmed, err := a.prune(t.Context())
	if err != nil || expired != 5 || trimmed != 0 {
		t.Fatalf("prune: %d expired, %d trimmed, %v", expired, trimmed, err)
	}
	if n, c := g.do(t, "ZCARD", a.k.keyIndex), g.do(t, "GET", a.k.keyCount); n != int64(0) || c != "0" {
		t.Fatalf("index holds %v sets of %v keys", n, c)
	}
}

func testPruneMaxEntries(t *testing.T, g *group) {
	a := g.must(t, "a", func(o *Options) { o.MaxEntries = 4 })
	var batches []*engine.Batch
	for range 3 {
		b := batchAfter(t, a, 3)
		if err := a.Commit(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	// A key of the first batch expired and was written again: it is the
	// newest batch's now, and stays.
	again := batchAfter(t, a, 1)
	again.Keys[0].Key = batches[0].Keys[2].Key
	if err := a.Commit(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	// Another member holding the task's lock keeps a from pruning.
	g.do(t, "SET", a.k.pruneLock, "other 1 x", "PX", "60000")
	if e, tr, err := a.prune(t.Context()); err != nil || e+tr != 0 {
		t.Fatalf("prune under another's lock: %d, %d, %v", e, tr, err)
	}
	g.do(t, "DEL", a.k.pruneLock)
	// 10 keys in sets of 3, 3, 3, 1: the two oldest sets leave, 4 keys stay.
	if _, trimmed, err := a.prune(t.Context()); err != nil || trimmed != 6 {
		t.Fatalf("prune: %d trimmed, %v; want 6", trimmed, err)
	}
	for i, b := range batches {
		for j, k := range b.Keys {
			want := int64(0)
			if i == 2 || (i == 0 && j == 2) {
				want = 1
			}
			if n := g.do(t, "EXISTS", a.k.key(k.Key)); n != want {
				t.Fatalf("key %d of batch %d exists=%v, want %d", j, i, n, want)
			}
		}
	}
	if c := g.do(t, "GET", a.k.keyCount); c != "4" {
		t.Fatalf("key count %v, want 4", c)
	}
}
