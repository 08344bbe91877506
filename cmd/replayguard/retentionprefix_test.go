package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
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

// A sink left behind at the end of ingest is reported in one line that
// says "audit sink" once, names the sink and how far it delivered.
func TestIngestSaysAuditSinkOnceWhenASinkIsLeftBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the sink flush timeout")
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	cfg := testConfig(t, fmt.Sprintf("audit: {sinks: [{name: siem, kind: syslog, address: '%s'}]}\n", addr))
	_, errs, code := cli(t, "", "ingest", "-c", cfg, meterFeed(t, 0, 20))
	want := "audit sink: records left undelivered: sink siem delivered up to 0 of 20; the rest is delivered from the cursor by the next run or ingest\n"
	if code != 0 || !strings.HasSuffix(errs, "\n"+want) {
		t.Fatalf("ingest with a dead sink: exit %d, stderr %q; want exit 0 and, after the sink's log lines, %q", code, errs, want)
	}
}
