package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/memory"
)

const (
	retentionFailures = "replayguard_audit_retention_failures_total"
	retentionSuccess  = "replayguard_audit_retention_last_success_timestamp_seconds"
)

// gathered reads the value of the metric name, without labels, from reg;
// false when reg serves no such series.
func gathered(t *testing.T, reg prometheus.Gatherer, name string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name || len(f.GetMetric()) == 0 {
			continue
		}
		m := f.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// serveInBackground serves d until the returned stop is called, which
// waits for serve to return.
func serveInBackground(t *testing.T, d *daemon) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.serve(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("serve did not return within 10s of its stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

// failedPasses counts the ERROR lines retention logged.
func failedPasses(logs string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, `msg="audit retention"`) {
			n++
		}
	}
	return n
}

// A retention pass that fails under run (the archive is a regular file,
// as when its mount is missing and something wrote in its place) is
// counted, and no pass is timed as successful; once the archive can be
// written, passes succeed and the time of the last one is served.
func TestRunCountsTheRetentionPassesThatFail(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	if err := os.WriteFile(archive, []byte("not a directory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `store: {kind: memory}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
audit:
  retention: {max_records: 10, interval: 20ms}
  archive: %s
`, archive), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testbroker.SyncBuffer{}
	a, err := Open(t.Context(), cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	d := &daemon{app: a, log: a.Log, reg: prometheus.NewRegistry(), consumer: &stoppingSource{a: a, n: 40}}
	if d.retention, err = a.Retention(); err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(t, d)

	eventually(t, "failed retention passes counted", func() bool {
		n, _ := gathered(t, d.reg, retentionFailures)
		return n >= 3
	})
	if v, ok := gathered(t, d.reg, retentionSuccess); ok {
		t.Fatalf("%s = %v while every pass fails; want it absent", retentionSuccess, v)
	}

	// The pass that succeeds must find the 40 records: the trim below is
	// checked against them.
	eventually(t, "the source's records committed", func() bool { return a.Engine.Stats().Position >= 40 })
	if err := os.Remove(archive); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	eventually(t, "a successful pass timed", func() bool {
		v, ok := gathered(t, d.reg, retentionSuccess)
		return ok && v >= float64(began.Unix())
	})
	stop()
	if base, err := a.Store.(engine.AuditTrimmer).AuditBase(t.Context()); err != nil || base.Position != 30 {
		t.Fatalf("the store's audit base is %d, %v; want 30: trimmed to its last 10 records", base.Position, err)
	}
	if n, _ := gathered(t, d.reg, retentionFailures); int(n) != failedPasses(logs.String()) {
		t.Fatalf("%s = %v, while %d failed passes were logged:\n%s", retentionFailures, n, failedPasses(logs.String()), logs)
	}
}

// On a shared store a pass that fails on one of the chains the member
// claims counts once for that chain, and is no successful pass, while
// the chains it could trim are trimmed.
func TestRunCountsTheChainsARetentionPassFailsOn(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	if err := os.MkdirAll(archive, 0o700); err != nil {
		t.Fatal(err)
	}
	// m0's part of the archive is a regular file: its chain cannot be
	// archived, m1's can.
	if err := os.WriteFile(filepath.Join(archive, "member-m0"), []byte("not a directory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := memory.NewGroup(0, 0)
	gone := groupMember(t, g, "m0", archive, filepath.Join(dir, "m0.jsonl"))
	decide(t, gone, 0, 30)
	gone.Close()

	logs := &testbroker.SyncBuffer{}
	a := groupMember(t, g, "m1", archive, filepath.Join(dir, "m1.jsonl"))
	a.Log = slog.New(slog.NewTextHandler(logs, nil))
	c, err := a.chainWork()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{app: a, log: a.Log, reg: prometheus.NewRegistry(), chains: c, consumer: &stoppingSource{a: a, n: 40}}
	stop := serveInBackground(t, d)

	eventually(t, "m1's chain trimmed and m0's failures counted", func() bool {
		n, _ := gathered(t, d.reg, retentionFailures)
		base, err := c.g.ChainBase(t.Context(), "m1")
		return n >= 3 && err == nil && base.Position == 30
	})
	stop()
	if v, ok := gathered(t, d.reg, retentionSuccess); ok {
		t.Fatalf("%s = %v while every pass fails on m0's chain; want it absent", retentionSuccess, v)
	}
	n, _ := gathered(t, d.reg, retentionFailures)
	if failed := failedPasses(logs.String()); int(n) != failed || strings.Count(logs.String(), "member m0's chain") != failed {
		t.Fatalf("%s = %v, while %d failures were logged, each to name m0's chain:\n%s", retentionFailures, n, failed, logs)
	}
}
