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
