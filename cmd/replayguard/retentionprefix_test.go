package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The error of a retention pass that finds the archive ahead of the store
// (the store's data removed, the archive kept) says "audit retention" once:
// ingest's words, then the archive's.
func TestIngestSaysAuditRetentionOnceWhenTheArchiveIsAheadOfTheStore(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	cfg := testConfig(t, fmt.Sprintf("audit: {retention: {max_records: 10}, archive: %s}\n", archive))
	mustRun(t, "", "ingest", "-c", cfg, meterFeed(t, 0, 50))
	if err := os.RemoveAll(filepath.Join(filepath.Dir(cfg), "data")); err != nil {
		t.Fatal(err)
	}
	_, errs, code := cli(t, "", "ingest", "-c", cfg, meterFeed(t, 0, 50))
	want := "replayguard ingest: audit retention: the archive holds records the store lost: " + archive + " holds sealed segment "
	if code != 1 || !strings.HasPrefix(errs, want) {
		t.Fatalf("ingest with the store's data gone: exit %d, stderr %q; want exit 1 and %q...", code, errs, want)
	}
}
