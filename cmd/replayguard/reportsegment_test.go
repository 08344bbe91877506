package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
)

// TestTheReportIsWrittenWhenASegmentIsMissingFromTheArchive: retention
// moved three ingests' oldest records into three segments, and the middle
// one is gone. The report is still written, its chain shown broken where
// the segment's positions should be, named as missing from the archive,
// and its figures read on from the segment after the hole (it was refused
// whole: the archive's scan stopped at the hole). Its lineages are left
// out, with a note, as for a hole in the store.
func TestTheReportIsWrittenWhenASegmentIsMissingFromTheArchive(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	cfg := testConfig(t, fmt.Sprintf("audit: {retention: {max_records: 20}, archive: %s}\n", archive))
	mustSay(t, mustIngest(t, cfg, meterFeed(t, 0, 40)), "the store keeps positions from 21")
	mustSay(t, mustIngest(t, cfg, meterFeed(t, 40, 40)), "the store keeps positions from 61")
	mustSay(t, mustIngest(t, cfg, meterFeed(t, 80, 40)), "the store keeps positions from 101")
	mustIngest(t, cfg, meterFeed(t, 110, 10)) // replays: the report would read the lineage of meter-3
	for _, name := range []string{audit.SegmentName(21, 60), audit.ManifestName(21, 60)} {
		if err := os.Remove(filepath.Join(archive, name)); err != nil {
			t.Fatal(err)
		}
	}

	_, errs, code := cli(t, "", "audit", "verify", "--archive", archive, "-c", cfg)
	if code == 0 || !strings.Contains(errs, "positions 21..60 are in no segment") {
		t.Fatalf("audit verify --archive: exit %d\n%s", code, errs)
	}
	out, errs, code := cli(t, "", "report", "--format", "json", "-c", cfg)
	if code != 0 || !strings.Contains(errs, "the lineages of the most replayed entities are left out") {
		t.Fatalf("report: exit %d\n%s", code, errs)
	}
	var rep struct {
		Totals struct {
			Applied   uint64 `json:"applied"`
			Duplicate uint64 `json:"duplicate"`
		} `json:"totals"`
		Verification struct {
			Intact bool `json:"intact"`
			Chains []struct {
				Broken string `json:"broken"`
			} `json:"chains"`
		} `json:"verification"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report: %v\n%.2000s", err, out)
	}
	want := "broken at position 21: positions 21..60 are missing from the archive"
	if rep.Verification.Intact || len(rep.Verification.Chains) != 1 || !strings.Contains(rep.Verification.Chains[0].Broken, want) {
		t.Fatalf("the report's verification does not say %q: %+v", want, rep.Verification)
	}
	// Every record but the 40 of the missing segment: 80 applied of the
	// 120 readings, and the 10 replays.
	if rep.Totals.Applied != 80 || rep.Totals.Duplicate != 10 {
		t.Fatalf("totals %+v, want 80 applied and 10 duplicates read across the hole", rep.Totals)
	}
	// The page's head columns are where the verification stopped, and say
	// so: a reviewer must not copy position 20's hash as the chain's head.
	page := filepath.Join(t.TempDir(), "report.html")
	if _, errs, code := cli(t, "", "report", "-o", page, "-c", cfg); code != 0 {
		t.Fatalf("report -o %s: exit %d\n%s", page, code, errs)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "20 (the last verified: not the chain") {
		t.Fatalf("the report's chain table does not say its head position is the last verified:\n%s", html)
	}
}
