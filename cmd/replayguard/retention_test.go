package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// meterFeed writes a capture of n fresh meter readings from msgId m-from on.
func meterFeed(t *testing.T, from, n int) string {
	t.Helper()
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, `{"topic":"plant/meter-3/energy","payload":{"msgId":"m-%d","kwh":0.25}}`+"\n", i)
	}
	path := filepath.Join(t.TempDir(), "feed.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestIngestAppliesRetentionAndVerifyChecksTheArchive(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	cfg := testConfig(t, fmt.Sprintf("audit: {retention: {max_records: 500}, archive: %s}\n", archive))

	_, errs, code := cli(t, "", "ingest", "-c", cfg, meterFeed(t, 0, 3000))
	if code != 0 || !strings.Contains(errs, "audit retention: 2500 records archived in 1 segment") {
		t.Fatalf("ingest: exit %d\n%s", code, errs)
	}
	out := mustRun(t, "", "audit", "verify", "-c", cfg)
	if want := "audit chain intact from the store's base: 500 records, positions 2501..3000 (1..2500 were archived by retention: add --archive DIR to verify them too)\n"; out != want {
		t.Fatalf("verify of the trimmed store:\n%s\nwant\n%s", out, want)
	}
	mustRun(t, "", "ingest", "-c", cfg, meterFeed(t, 3000, 1000))
	out = mustRun(t, "", "audit", "verify", "--archive", archive, "-c", cfg)
	want := "archive: 2 segments, positions 1..3500 intact\nstore: positions 3501..4000 intact\naudit chain intact: 4000 records, archive and store as one chain\n"
	if out != want {
		t.Fatalf("verify --archive:\n%s\nwant\n%s", out, want)
	}
	if n := strings.Count(mustRun(t, "", "audit", "export", "-c", cfg), "\n"); n != 500 {
		t.Fatalf("export after retention: %d records, want the 500 the store keeps", n)
	}
	// The report reads the archive (audit.archive) before the store: every
	// decision of both ingests, one chain from position 1.
	var rep struct {
		Archive string `json:"archive"`
		Totals  struct {
			Applied uint64 `json:"applied"`
		} `json:"totals"`
		Verification struct {
			Intact bool `json:"intact"`
			Chains []struct {
				Records       uint64 `json:"records"`
				Archived      uint64 `json:"archived"`
				FirstPosition uint64 `json:"first_position"`
				LastPosition  uint64 `json:"last_position"`
				Broken        string `json:"broken"`
			} `json:"chains"`
		} `json:"verification"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "", "report", "--format", "json", "-c", cfg)), &rep); err != nil {
		t.Fatal(err)
	}
	if v := rep.Verification; !v.Intact || len(v.Chains) != 1 || v.Chains[0].Records != 4000 || v.Chains[0].Archived != 3500 ||
		v.Chains[0].FirstPosition != 1 || v.Chains[0].LastPosition != 4000 || rep.Totals.Applied != 4000 || rep.Archive != archive {
		t.Fatalf("report of the trimmed store with its archive: %+v, want one intact chain of 4000 records, 3500 from %s, 4000 applied", rep, archive)
	}
	empty := t.TempDir()
	_, errs, code = cli(t, "", "report", "--archive", empty, "-c", cfg)
	if code == 0 || !strings.Contains(errs, "positions 1..3500 of the audit chain are in neither the archive "+empty+" nor the store") {
		t.Fatalf("report with an archive that lacks them: exit %d\n%s", code, errs)
	}

	first, _ := filepath.Glob(filepath.Join(archive, "audit-00000000000000000001-*"))
	for _, f := range first {
		os.Remove(f)
	}
	_, errs, code = cli(t, "", "audit", "verify", "--archive", archive, "-c", cfg)
	if code == 0 || !strings.Contains(errs, "audit chain broken at position 1: positions 1..2500 are in no segment") {
		t.Fatalf("verify --archive with the first segment gone: exit %d\n%s", code, errs)
	}
	_, errs, code = cli(t, "", "report", "-c", cfg)
	if code == 0 || !strings.Contains(errs, "positions 1..2500 are in no segment") {
		t.Fatalf("report with the first segment gone: exit %d\n%s", code, errs)
	}
}

// trimmedDaemon runs the daemon with retention keeping 20 records and
// publishes 100 incident updates to it; it returns once audit verify,
// through the daemon's API, says the store holds positions 81..100, with
// the configuration, the archive directory and what stops the daemon.
func trimmedDaemon(t *testing.T) (cfg, archive string, stop func()) {
	t.Helper()
	archive = filepath.Join(t.TempDir(), "archive")
	bin := buildBinary(t)
	cfg, listen, broker := daemonConfig(t, fmt.Sprintf("audit: {retention: {max_records: 20, interval: 100ms}, archive: %s}\n", archive))
	daemon, exited := startRun(t, bin, cfg, listen)
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			stopRun(t, daemon, exited)
		}
	}
	t.Cleanup(stop)

	publishIncidents(t, broker, 100)
	want := "audit chain intact from the store's base: 20 records, positions 81..100 (1..80 were archived by retention: add --archive DIR to verify them too)\n"
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out = mustRun(t, "", "audit", "verify", "-c", cfg); out == want {
			break
		}
	}
	if out != want {
		t.Fatalf("audit verify through the API: %q, want %q", out, want)
	}
	return cfg, archive, stop
}

// TestRunAppliesRetention runs the daemon with a small retention and checks
// that its background task archives and trims while it runs, that verify
// through its API starts at the store's base, and that archive and store
// verify as one chain once it stopped.
func TestRunAppliesRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	cfg, archive, stop := trimmedDaemon(t)
	remote := mustRun(t, "", "audit", "verify", "--archive", archive, "-c", cfg)
	if !strings.HasSuffix(remote, "store: positions 81..100 intact\naudit chain intact: 100 records, archive and store as one chain\n") {
		t.Fatalf("audit verify --archive through the API: %q", remote)
	}
	stop()
	// The same words, read through the API or from the store.
	if out := mustRun(t, "", "audit", "verify", "--archive", archive, "-c", cfg); out != remote {
		t.Fatalf("audit verify --archive on the stopped store: %q; through the API it was %q", out, remote)
	}
}

// TestReportOfAnUntrimmedStoreNeedsNoArchive: where retention trimmed
// nothing, the report reads the store alone, whether or not the
// configured archive is there; an --archive that does not exist is
// refused.
func TestReportOfAnUntrimmedStoreNeedsNoArchive(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive")
	cfg := testConfig(t, fmt.Sprintf("audit: {retention: {max_records: 500}, archive: %s}\n", archive))
	mustRun(t, "", "ingest", "-c", cfg, meterFeed(t, 0, 100))
	if err := os.RemoveAll(archive); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Totals struct {
			Applied uint64 `json:"applied"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "", "report", "--format", "json", "-c", cfg)), &rep); err != nil || rep.Totals.Applied != 100 {
		t.Fatalf("report: %+v, %v; want the 100 applied", rep, err)
	}
	_, errs, code := cli(t, "", "report", "--archive", archive, "-c", cfg)
	if code == 0 || !strings.Contains(errs, "--archive: stat "+archive) {
		t.Fatalf("report --archive of a directory that does not exist: exit %d\n%s", code, errs)
	}
}
