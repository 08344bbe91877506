package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestTheReportNamesAHoleInTheStoreNotItsCompleteArchive: a member's chain
// on PostgreSQL, trimmed by retention into an archive that holds every
// position up to the store's base, loses records in the store above it
// (deleted by hand). The report is written, its chain shown broken where
// the store lacks the records, as audit verify --archive finds it; it
// blames no archive, and its lineages are left out, with a note.
func TestTheReportNamesAHoleInTheStoreNotItsCompleteArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	archive := filepath.Join(t.TempDir(), "archive")
	cfgPath := storeConfig(t, fmt.Sprintf("{kind: postgres, url: %q, member: a}", pg.URL()))
	appendConfig(t, cfgPath, fmt.Sprintf("audit: {retention: {max_records: 50}, archive: %s}\n", archive))
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	mustIngest(t, cfgPath, meterFeed(t, 0, 100))
	errs := mustIngest(t, cfgPath, meterFeed(t, 90, 10)) // replays: the report reads the lineage of meter-3
	mustSay(t, errs, "the store keeps its positions from 61")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cfg.Store.URL)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Store.Schema
	if _, err := conn.Exec(ctx, `DELETE FROM `+s+`.audit WHERE member = (SELECT number FROM `+s+`.members WHERE member = 'a') AND position BETWEEN 66 AND 75`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	// audit verify names the hole as the report does.
	hole := "broken at position 66: positions 66..75 are missing from the store: they follow the store's base, position 60"
	for _, args := range [][]string{{"audit", "verify", "--archive", archive, "-c", cfgPath}, {"audit", "verify", "-c", cfgPath}} {
		if _, errs, code := cli(t, "", args...); code == 0 || !strings.Contains(errs, hole) {
			t.Fatalf("%s: exit %d\n%s", strings.Join(args, " "), code, errs)
		}
	}
	out, errs, code := cli(t, "", "report", "--format", "json", "-c", cfgPath)
	if code != 0 || !strings.Contains(errs, "the lineages of the most replayed entities are left out") || strings.Contains(errs, "archive lacks") {
		t.Fatalf("report: exit %d\n%s", code, errs)
	}
	want := `broken at position 66: positions 66..75 are missing from the store: they follow the store's base, position 60, the last audit retention moved to the archive; the store lost them`
	if !strings.Contains(out, want) || strings.Contains(out, "missing from the archive") {
		t.Fatalf("the report's verification does not say %q:\n%.3000s", want, out)
	}
}
