package report_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// TestAStoreWithHolesReadsTheArchiveOnceAHoleIsFoundNotThere: records
// missing from the middle of the store (deleted, or lost with a store
// that failed over) are a break of the chain the report names; the
// archive, read again for the first of them and found not to hold it, is
// not read again, in full, for each of the others: an archive of years of
// a fleet's decisions takes minutes to read.
func TestAStoreWithHolesReadsTheArchiveOnceAHoleIsFoundNotThere(t *testing.T) {
	ctx := context.Background()
	var recs []engine.AuditRecord
	for i := range 300 {
		recs = append(recs, rec(i, "applied", primary, int64(i+1)))
	}
	all := chain(t, "", recs...)
	archived := all[:100]
	var stored []engine.AuditRecord
	holes := 0
	for i, r := range all[100:] {
		if i%10 == 5 { // 20 records deleted from the store
			holes++
			continue
		}
		stored = append(stored, r)
	}
	reads := 0
	archive := func(_ context.Context, _ string, fn func(engine.AuditRecord) error) error {
		reads++
		return scan(archived)(fn)
	}
	rep, err := report.Build(report.Scanned(report.WithArchive(ctx, "", archive, scan(stored))),
		report.Options{Heads: map[string]engine.AuditHead{"": {Position: 300, Hash: all[299].Hash}}, Archive: "dir"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verification.Intact {
		t.Fatalf("verification %+v: want the holes named", rep.Verification)
	}
	if reads > 2 {
		t.Fatalf("the archive was read %d times for a store with %d holes; want twice at most (once, then once for the first hole)", reads, holes)
	}
}
