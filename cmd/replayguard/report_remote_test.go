package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// TestReportThroughTheAPIOfATrimmedStore: while `run` holds a store whose
// oldest records retention archived, a report of a period after the
// store's first record reads the records through the API; the chain is
// intact (audit verify says so through the same API), so the report, read
// without the archive, must not call it broken.
func TestReportThroughTheAPIOfATrimmedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	archive := filepath.Join(t.TempDir(), "archive")
	bin := buildBinary(t)
	cfg, listen, broker := daemonConfig(t, fmt.Sprintf("audit: {retention: {max_records: 20, interval: 100ms}, archive: %s}\n", archive))
	daemon, exited := startRun(t, bin, cfg, listen)
	defer stopRun(t, daemon, exited)

	publishIncidents(t, broker, 100)
	want := "audit chain intact from position 81: 20 records (the records before it are not in the store: add --archive DIR to verify them)\n"
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out = mustRun(t, "", "audit", "verify", "-c", cfg); out == want {
			break
		}
	}
	if out != want {
		t.Fatalf("audit verify through the API: %q, want %q", out, want)
	}
	var first engine.AuditRecord
	line, _, _ := strings.Cut(mustRun(t, "", "audit", "export", "-c", cfg), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil || first.Position != 81 {
		t.Fatalf("the store's first record: %+v, %v", first, err)
	}
	if err := os.RemoveAll(archive); err != nil { // the archive is elsewhere: not read
		t.Fatal(err)
	}
	rep := reportJSON(t, "-c", cfg, "--from", first.Time.Add(time.Nanosecond).Format(time.RFC3339Nano))
	if v := rep.Verification; !v.Intact || len(v.Chains) != 1 || v.Chains[0].Broken != "" || v.Chains[0].Records != 20 {
		t.Fatalf("report through the API: %+v, want the 20 stored records verified intact", v)
	}
}
