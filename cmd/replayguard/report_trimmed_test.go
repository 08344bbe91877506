package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportAfterTheStoresFirstRecordNeedsNoArchive: the report of a
// trimmed store refuses a period reaching before the store's first record
// and names the remedy, a --from after it. That remedy must work when
// replays were suppressed in the period too (the most replayed entities
// get lineage sections).
func TestReportAfterTheStoresFirstRecordNeedsNoArchive(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	cfg := testConfig(t, fmt.Sprintf("audit: {retention: {max_records: 500}, archive: %s}\n", archive))
	mustRun(t, "", "ingest", "-c", cfg, meterFeed(t, 0, 1000))
	time.Sleep(20 * time.Millisecond)
	from := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	mustRun(t, "", "ingest", "-c", cfg, meterFeed(t, 990, 10)) // replays, suppressed
	if err := os.RemoveAll(archive); err != nil {
		t.Fatal(err)
	}
	_, errs, code := cli(t, "", "report", "--format", "json", "-c", cfg)
	if code == 0 || !strings.Contains(errs, "give a --from after") {
		t.Fatalf("report of the whole log without the archive: exit %d\n%s", code, errs)
	}
	_, errs, code = cli(t, "", "report", "--format", "json", "-c", cfg, "--from", from.Format(time.RFC3339Nano))
	if code != 0 || !strings.Contains(errs, "lineages of the most replayed entities are left out") {
		t.Fatalf("report after the store's first record: exit %d\n%s\nwant a note that the lineages are left out", code, errs)
	}
	rep := reportJSON(t, "-c", cfg, "--from", from.Format(time.RFC3339Nano))
	if rep.Totals.Duplicate != 10 || rep.Totals.Applied != 0 || len(rep.Replayed) != 1 || rep.Replayed[0].Suppressed != 10 {
		t.Fatalf("totals %+v, replayed %+v; want the 10 replays suppressed", rep.Totals, rep.Replayed)
	}
}
