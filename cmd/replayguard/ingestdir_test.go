package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory given to ingest in place of a capture is refused before the
// store is opened: a mistyped path neither creates an empty store where
// the configuration says nor takes the lock of one a run holds.
func TestIngestOfADirectoryIsRefusedBeforeTheStoreIsOpened(t *testing.T) {
	cfg := testConfig(t, "")
	store := filepath.Join(filepath.Dir(cfg), "data")
	captures := t.TempDir()
	_, errs, code := cli(t, "", "ingest", "-c", cfg, captures)
	if code != exitError || !strings.Contains(errs, "ingest "+captures+": is a directory, not a capture file") {
		t.Fatalf("exit %d, stderr %q; want 1 and that %s is a directory, not a capture file", code, errs, captures)
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Fatalf("the store %s was created (%v)", store, err)
	}
}

// A bad --batch or --drain-timeout is said before the capture is opened:
// a command line with a mistake in a flag and a capture that is not there
// (yet) exits 2 naming the flag, not 1 about the file.
func TestIngestFlagMistakesAreSaidBeforeTheCaptureIsOpened(t *testing.T) {
	cfg := testConfig(t, "")
	missing := filepath.Join(t.TempDir(), "feed.jsonl")
	for _, flags := range [][]string{{"--batch", "0"}, {"--drain-timeout", "-1s"}} {
		_, errs, code := cli(t, "", append(append([]string{"ingest"}, flags...), "-c", cfg, missing)...)
		if code != exitUsage || !strings.Contains(errs, flags[0]) {
			t.Errorf("ingest %s %s: exit %d, want %d naming %s\n%s", strings.Join(flags, " "), missing, code, exitUsage, flags[0], errs)
		}
	}
}
