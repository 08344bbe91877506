package report_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// moved is a group whose stored rows were edited: heads are the chain
// heads the store keeps apart from the rows.
type moved struct {
	group
	heads map[string]engine.AuditHead
}

func (g moved) Chains(context.Context) ([]engine.Chain, error) {
	return []engine.Chain{{Member: "a", Head: g.heads["a"]}, {Member: "b", Head: g.heads["b"]}}, nil
}

func TestAReportCatchesARecordMovedToAnotherMembersChain(t *testing.T) {
	a := chain(t, "a", rec(10, "applied", primary, 1), rec(70, "applied", primary, 2), rec(90, "applied", primary, 3))
	b := chain(t, "b", rec(20, "duplicate", primary, 1))
	// a's last record is moved into b's rows (its member column edited):
	// the store's chain of a lacks it, and b's holds a record of a.
	g := moved{group: group{"a": a[:2], "b": append(b, a[2])},
		heads: map[string]engine.AuditHead{"a": {Position: 3, Hash: a[2].Hash}, "b": {Position: 1, Hash: b[0].Hash}}}
	recs, heads, err := report.Chains(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(recs, report.Options{Heads: heads})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verification.Intact {
		t.Fatalf("a record moved from a's chain into b's is reported intact: %+v", rep.Verification)
	}
}
