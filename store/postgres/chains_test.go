package postgres_test

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestChainSurvivesServerKill kills the server with -9 after a member's
// chain was trimmed in the middle of a batch and a sink's cursor was set:
// once it is back, the base, the cursor, the head and the records from the
// base on are there, and the member's next batch follows its head.
func TestChainSurvivesServerKill(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	s := g.mustOpen("m1")
	recs := records("m1", 1, 11)
	for _, b := range [][]engine.AuditRecord{recs[:4], recs[4:10]} {
		if err := s.Commit(t.Context(), &engine.Batch{Audit: b}); err != nil {
			t.Fatal(err)
		}
	}
	base := engine.AuditHead{Position: 6, Hash: recs[5].Hash}
	if err := s.TrimChain(t.Context(), "m1", 7, base); err != nil {
		t.Fatal(err)
	}
	if err := s.SetChainCursor(t.Context(), "m1", "siem", 8); err != nil {
		t.Fatal(err)
	}
	pg.Kill()
	pg.Restart()
	ro, err := g.open("")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := ro.ChainBase(t.Context(), "m1"); err != nil || b != base {
		t.Fatalf("base after the restart = %+v, %v; want %+v", b, err, base)
	}
	if c, err := ro.ChainCursor(t.Context(), "m1", "siem"); err != nil || c != 8 {
		t.Fatalf("cursor after the restart = %d, %v; want 8", c, err)
	}
	head := engine.AuditHead{Position: 10, Hash: recs[9].Hash}
	if cs, err := ro.Chains(t.Context()); err != nil || len(cs) != 1 || cs[0].Head != head {
		t.Fatalf("chains after the restart = %+v, %v", cs, err)
	}
	var got []engine.AuditRecord
	if err := ro.ScanChain(t.Context(), "m1", 0, func(r engine.AuditRecord) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].Position != 7 || got[0].Prev != base.Hash {
		t.Fatalf("after the restart the chain holds %d records", len(got))
	}
	postgres.ResetPool(s) // its connections died with the server
	if err := s.Commit(t.Context(), &engine.Batch{Audit: recs[10:]}); err != nil {
		t.Fatalf("the next batch after the restart: %v", err)
	}
	if err := s.SetChainCursor(t.Context(), "nobody", "siem", 1); err == nil {
		t.Fatal("a cursor was set on the chain of a member the group never had")
	}
}
