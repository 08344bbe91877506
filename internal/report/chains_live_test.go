package report_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// growing is a group whose member a commits one more record after the
// chains' heads were read: a report of a running group.
type growing struct {
	group
	later engine.AuditRecord
}

func (g growing) ScanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error {
	if err := g.group.ScanChain(ctx, member, from, fn); err != nil {
		return err
	}
	if member == "a" && g.later.Position >= from {
		return fn(g.later)
	}
	return nil
}

func TestChainsOfARunningGroupAreIntact(t *testing.T) {
	a := chain(t, "a", rec(10, "applied", primary, 1), rec(70, "applied", primary, 2), rec(90, "applied", primary, 3))
	g := growing{group: group{"a": a[:2], "b": chain(t, "b", rec(20, "duplicate", primary, 1))}, later: a[2]}
	recs, heads, err := report.Chains(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(recs, report.Options{Heads: heads})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verification.Intact {
		t.Fatalf("a member committing while the report reads its chain made it broken: %+v", rep.Verification)
	}
}
