package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestVerifyOfAStoreRetentionEmptiedSaysSo: audit.retention.max_age moved
// every record of the embedded store to the archive. audit verify says
// all of them were archived, and with the archive that the store holds
// nothing after it, the words a shared store's chain gets (it printed
// "0 records, positions 31..30").
func TestVerifyOfAStoreRetentionEmptiedSaysSo(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	cfg := testConfig(t, fmt.Sprintf("audit: {retention: {max_age: 1s}, archive: %s}\n", archive))
	mustIngest(t, cfg, meterFeed(t, 0, 30))
	time.Sleep(1100 * time.Millisecond) // the records age past max_age
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mustSay(t, mustIngest(t, cfg, empty), "the store keeps positions from 31")

	if out, want := mustRun(t, "", "audit", "verify", "-c", cfg),
		"audit chain intact: all its records, 1..30, were archived by retention: add --archive DIR to verify them\n"; out != want {
		t.Fatalf("verify:\n%s\nwant\n%s", out, want)
	}
	if out, want := mustRun(t, "", "audit", "verify", "--archive", archive, "-c", cfg),
		"archive: 1 segment, positions 1..30 intact\nstore: nothing after the archive\naudit chain intact: 30 records, archive and store as one chain\n"; out != want {
		t.Fatalf("verify --archive:\n%s\nwant\n%s", out, want)
	}
}
