package report_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// TestAReportOfALogTrimmedWhileItIsReadCountsEveryRecordOnce: the process
// that holds the store (read through its API), or a member of a running
// group, runs audit retention: a pass that moves records into the archive
// after the report read the archive, before or while it reads the store,
// leaves no hole: every decision is counted once and the chain is intact.
func TestAReportOfALogTrimmedWhileItIsReadCountsEveryRecordOnce(t *testing.T) {
	ctx := context.Background()
	all, _, head := trimmedLog(t, "")
	for _, tc := range []struct {
		name  string
		after int // stored records read before the pass
	}{
		{"a pass before the store is read", 0},
		{"a pass while the store is read", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			archived := all[:3] // as the report begins: base 3
			archive := func(_ context.Context, _ string, fn func(engine.AuditRecord) error) error { return scan(archived)(fn) }
			store := func(fn func(engine.AuditRecord) error) error {
				if err := scan(all[3 : 3+tc.after])(fn); err != nil {
					return err
				}
				archived = all[:8] // a retention pass meanwhile: base 8
				return scan(all[8:])(fn)
			}
			rep, err := report.Build(report.Scanned(report.WithArchive(ctx, "", archive, store)),
				report.Options{Heads: map[string]engine.AuditHead{"": head}, Archive: "dir"})
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Verification.Chains[0]
			if !rep.Verification.Intact || c.Records != 10 || c.FirstPosition != 1 || c.LastPosition != 10 {
				t.Errorf("%+v: want one intact chain of 10 records", rep.Verification)
			}
			if o := rep.Totals.Outcomes; o.Applied != 8 || o.Duplicate != 2 || o.Total() != 10 {
				t.Errorf("totals %+v, want the 10 decisions: 8 applied, 2 duplicate", o)
			}
		})
	}
}
