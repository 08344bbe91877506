package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestIngestDeliversToTheFileSinkBeforeRetentionTrims ingests with a file
// sink and a retention that keeps 500 records: the file receives all of
// them, byte for byte what audit export wrote before the trim.
func TestIngestDeliversToTheFileSinkBeforeRetentionTrims(t *testing.T) {
	dir := t.TempDir()
	sinkFile := filepath.Join(dir, "audit.jsonl")
	cfg := testConfig(t, fmt.Sprintf("audit: {sinks: [{name: jsonl, kind: file, path: %s}]}\n", sinkFile))
	mustRun(t, "", "ingest", "-c", cfg, meterFeed(t, 0, 300))
	export := mustRun(t, "", "audit", "export", "-c", cfg)
	got, err := os.ReadFile(sinkFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != export {
		t.Fatalf("the sink's file (%d lines) is not the audit export (%d lines)", strings.Count(string(got), "\n"), strings.Count(export, "\n"))
	}

	b, _ := os.ReadFile(cfg)
	archive := filepath.Join(dir, "archive")
	os.WriteFile(cfg, []byte(strings.Replace(string(b), "audit: {", fmt.Sprintf("audit: {retention: {max_records: 50}, archive: %s, ", archive), 1)), 0o644)
	mustRun(t, "", "ingest", "-c", cfg, meterFeed(t, 300, 200))
	got, _ = os.ReadFile(sinkFile)
	if n := strings.Count(string(got), "\n"); n != 500 {
		t.Fatalf("the sink's file holds %d records after the second ingest, want 500", n)
	}
	if out := mustRun(t, "", "audit", "verify", "--archive", archive, "-c", cfg); !strings.HasSuffix(out, "audit chain intact: 500 records, archive and store as one chain\n") {
		t.Fatalf("verify: %q", out)
	}
}

// TestIngestWithADeadSinkEndsAndLeavesTheRestToTheCursor: a syslog sink
// nobody listens on does not fail ingest; the next ingest, with the
// receiver gone for good and a file sink beside it, still ends.
func TestIngestWithADeadSinkEndsAndLeavesTheRestToTheCursor(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the sink flush timeout")
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	cfg := testConfig(t, fmt.Sprintf("audit: {sinks: [{name: siem, kind: syslog, address: '%s'}]}\n", addr))
	start := time.Now()
	out, errs, code := cli(t, "", "ingest", "-c", cfg, meterFeed(t, 0, 20))
	if code != 0 || !strings.Contains(errs, "sink siem delivered up to 0 of 20") {
		t.Fatalf("ingest with a dead sink: exit %d\n%s\n%s", code, out, errs)
	}
	if d := time.Since(start); d > app.SinkFlushTimeout+5*time.Second {
		t.Fatalf("ingest took %s with a dead sink", d)
	}
}

// TestRunStreamsToTheFileSink runs the daemon with a file sink: every
// decision reaches the file while it runs.
func TestRunStreamsToTheFileSink(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	sinkFile := filepath.Join(t.TempDir(), "audit.jsonl")
	bin := buildBinary(t)
	cfg, listen, broker := daemonConfig(t, fmt.Sprintf("audit: {sinks: [{name: jsonl, kind: file, path: %s, max_bytes: 16KiB}]}\n", sinkFile))
	daemon, exited := startRun(t, bin, cfg, listen)

	publishIncidents(t, broker, 100)
	lines := func() int {
		n := 0
		files, _ := filepath.Glob(sinkFile + "*")
		for _, p := range files {
			b, _ := os.ReadFile(p)
			n += strings.Count(string(b), "\n")
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); lines() < 100 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
	}
	if n := lines(); n != 100 {
		t.Fatalf("the sink's files hold %d records, want 100", n)
	}
	if _, err := os.Stat(sinkFile + ".1"); err != nil {
		t.Fatalf("no rotation at 16KiB: %v", err)
	}
	stopRun(t, daemon, exited)
}
