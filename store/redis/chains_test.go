package redis

import (
	"errors"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestChainSurvivesServerKill kills the server with -9 after a member's
// chain was trimmed in the middle of a batch and a sink's cursor was set:
// once it is back, the base, the cursor, the head and the records from the
// base on are there, and the member's next batch follows its head.
func TestChainSurvivesServerKill(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	g := newGroup(srv)
	s := g.must(t, "a")
	recs := records(t, "a", engine.AuditHead{}, 10)
	for _, b := range [][]engine.AuditRecord{recs[:4], recs[4:]} {
		if err := s.Commit(t.Context(), &engine.Batch{Audit: b}); err != nil {
			t.Fatal(err)
		}
	}
	base := engine.AuditHead{Position: 6, Hash: recs[5].Hash}
	if err := s.TrimChain(t.Context(), "a", 7, base); err != nil {
		t.Fatal(err)
	}
	if err := s.SetChainCursor(t.Context(), "a", "siem", 8); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart()
	ro := g.must(t, "")
	if b, err := ro.ChainBase(t.Context(), "a"); err != nil || b != base {
		t.Fatalf("base after the restart = %+v, %v; want %+v", b, err, base)
	}
	if c, err := ro.ChainCursor(t.Context(), "a", "siem"); err != nil || c != 8 {
		t.Fatalf("cursor after the restart = %d, %v; want 8", c, err)
	}
	head := engine.AuditHead{Position: 10, Hash: recs[9].Hash}
	if cs, err := ro.Chains(t.Context()); err != nil || len(cs) != 1 || cs[0].Head != head {
		t.Fatalf("chains after the restart = %+v, %v", cs, err)
	}
	if got := chainOf(t, ro, "a"); len(got) != 4 || got[0].Position != 7 || got[0].Prev != base.Hash {
		t.Fatalf("after the restart the chain holds %d records", len(got))
	}
	if err := s.Commit(t.Context(), &engine.Batch{Audit: records(t, "a", head, 1)}); err != nil {
		t.Fatalf("the next batch after the restart: %v", err)
	}
}

// TestScanChainReadsEveryBatchFromAnyPosition commits more batches than
// ScanChain reads in its growing pages, and scans from a batch's first
// record, from inside one and from the last; then sets a sink's cursor at
// the first, an inner and the last record of a batch.
func TestScanChainReadsEveryBatchFromAnyPosition(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	s := newGroup(srv).must(t, "a")
	const batches, size = 40, 3
	recs := records(t, "a", engine.AuditHead{}, batches*size)
	for i := 0; i < len(recs); i += size {
		if err := s.Commit(t.Context(), &engine.Batch{Audit: recs[i : i+size]}); err != nil {
			t.Fatal(err)
		}
	}
	for _, from := range []uint64{1, 2, 3, 4, 50, 118, 120} {
		var got []uint64
		if err := s.ScanChain(t.Context(), "a", from, func(r engine.AuditRecord) error {
			got = append(got, r.Position)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(recs)-int(from)+1 || got[0] != from || got[len(got)-1] != uint64(len(recs)) {
			t.Fatalf("ScanChain from %d read %d records (%v…), want %d from %d", from, len(got), got[:min(len(got), 3)], len(recs)-int(from)+1, from)
		}
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1]+1 {
				t.Fatalf("ScanChain from %d: %d after %d", from, got[i], got[i-1])
			}
		}
	}
	for _, r := range []engine.AuditRecord{recs[3], recs[4], recs[5], recs[len(recs)-1]} {
		if err := s.SetChainCursorAt(t.Context(), "a", "siem", engine.AuditHead{Position: r.Position, Hash: r.Hash}); err != nil {
			t.Fatalf("SetChainCursorAt(%d): %v", r.Position, err)
		}
		wrong := engine.AuditHead{Position: r.Position, Hash: recs[0].Hash}
		if err := s.SetChainCursorAt(t.Context(), "a", "siem", wrong); !errors.Is(err, engine.ErrCursorRecord) {
			t.Fatalf("SetChainCursorAt(%d, another record's hash) = %v, want ErrCursorRecord", r.Position, err)
		}
	}
}
