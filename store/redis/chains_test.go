package redis

import (
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
