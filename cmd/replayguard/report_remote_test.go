package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// TestReportThroughTheAPIOfATrimmedStore: while `run` holds a store whose
// oldest records retention archived, a report of a period after the
// store's first record reads the records through the API; the chain is
// intact (audit verify says so through the same API), so the report, read
// without the archive, must not call it broken, and it checks the log
// against the head the process committed.
func TestReportThroughTheAPIOfATrimmedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	cfg, archive, _ := trimmedDaemon(t)
	var first engine.AuditRecord
	line, _, _ := strings.Cut(mustRun(t, "", "audit", "export", "-c", cfg), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil || first.Position != 81 {
		t.Fatalf("the store's first record: %+v, %v", first, err)
	}
	if err := os.RemoveAll(archive); err != nil { // the archive is elsewhere: not read
		t.Fatal(err)
	}
	rep := reportJSON(t, "-c", cfg, "--from", first.Time.Add(time.Nanosecond).Format(time.RFC3339Nano))
	if v := rep.Verification; !v.Intact || !v.HeadChecked || len(v.Chains) != 1 || v.Chains[0].Broken != "" || v.Chains[0].Records != 20 {
		t.Fatalf("report through the API: %+v, want the 20 stored records verified intact up to the process's head", v)
	}
}
