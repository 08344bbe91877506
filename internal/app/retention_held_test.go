package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

const retentionHeld = "replayguard_audit_retention_held_records"

// heldWarnings counts the WARN lines that say a sink holds retention back.
func heldWarnings(logs string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "held back by an audit sink that has yet to deliver") {
			n++
		}
	}
	return n
}

// An audit sink whose endpoint is down delivers nothing, and retention
// keeps every record from its cursor on: the store grows beyond
// audit.retention.max_records. run says so, naming the sink and how many
// records it holds beyond the limit: a WARN at the first pass (and not at
// each of the next), /readyz's warning, and
// replayguard_audit_retention_held_records{sink}.
func TestRunSaysWhichAuditSinkHoldsRecordsBeyondMaxRecords(t *testing.T) {
	dir := t.TempDir()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + down.Addr().String() + "/v1/logs"
	down.Close() // nothing listens there: the collector is down
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `store: {kind: memory}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
http: {listen: %s}
audit:
  retention: {max_records: 10, interval: 20ms}
  archive: %s
  sinks: [{name: collector, kind: otlp, endpoint: %q}]
`, ln.Addr(), filepath.Join(dir, "archive"), endpoint), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testbroker.SyncBuffer{}
	a, err := Open(t.Context(), cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Sinks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	d := &daemon{app: a, log: a.Log, reg: prometheus.NewRegistry(), consumer: &stoppingSource{a: a, n: 40}}
	if d.retention, err = a.Retention(); err != nil {
		t.Fatal(err)
	}
	srv, err := d.newServer(Build{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(served) }()
	t.Cleanup(func() { cancel(); <-served })

	eventually(t, "the 30 records beyond max_records the sink holds served", func() bool {
		n, ok := gathered(t, d.reg, retentionHeld)
		return ok && n == 30
	})
	// Two more passes: the WARN is not said again at each.
	last, _ := gathered(t, d.reg, retentionSuccess)
	for range 2 {
		prev := last
		eventually(t, "one more retention pass", func() bool {
			last, _ = gathered(t, d.reg, retentionSuccess)
			return last > prev
		})
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Ready   bool
		Warning string
	}
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := "audit retention is held back: audit sink collector has yet to deliver 30 records (cursor at 0), beyond audit.retention.max_records (10)"
	if !ready.Ready || !strings.Contains(ready.Warning, want) {
		t.Fatalf("/readyz = %+v; want it ready, warning %q", ready, want)
	}
	stop()
	if n := heldWarnings(logs.String()); n != 1 {
		t.Fatalf("%d WARN lines of the held records over the passes; want 1, the first pass's:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "sink=collector records=30 cursor=0 max_records=10") {
		t.Fatalf("the WARN does not name the sink and the records it holds:\n%s", logs)
	}
	if base, err := a.Store.(engine.AuditTrimmer).AuditBase(t.Context()); err != nil || base.Position != 0 {
		t.Fatalf("the store's audit base is %d, %v; want 0: nothing the sink has yet to deliver leaves", base.Position, err)
	}
}

// The WARN of a sink that holds records beyond max_records comes at the
// first pass that finds it, then at most every HeldWarnEvery while it
// lasts (each pass runs every audit.retention.interval, 1m by default),
// each sink on its own; an INFO says when no sink holds any.
func TestTheWarningOfAHoldingSinkIsRateLimited(t *testing.T) {
	logs := &strings.Builder{}
	h := newHeldBySinks(slog.New(slog.NewTextHandler(logs, nil)), 10, []string{"collector", "file"})
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	h.now = func() time.Time { return now }
	collector := chainHeld{held: []audit.SinkHeld{{Sink: "collector", Cursor: 5, Records: 20}}}
	both := chainHeld{held: []audit.SinkHeld{{Sink: "collector", Cursor: 5, Records: 20}, {Sink: "file", Cursor: 8, Records: 17}}}
	warns := func(sink string) int {
		n := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if heldWarnings(l) == 1 && strings.Contains(l, "sink="+sink+" ") {
				n++
			}
		}
		return n
	}
	for _, step := range []struct {
		after           time.Duration
		found           []chainHeld
		collector, file int // WARN lines so far
		cleared         bool
	}{
		{0, []chainHeld{collector}, 1, 0, false},
		{time.Minute, []chainHeld{collector}, 1, 0, false},
		{time.Minute, []chainHeld{both}, 1, 1, false}, // file's first
		{HeldWarnEvery - 2*time.Minute - time.Nanosecond, []chainHeld{both}, 1, 1, false},
		{time.Nanosecond, []chainHeld{both}, 2, 1, false},
		{2 * time.Minute, []chainHeld{both}, 2, 2, false},
		{time.Minute, nil, 2, 2, true},
		{time.Minute, []chainHeld{collector}, 2, 2, true}, // back within HeldWarnEvery of its last WARN
		{HeldWarnEvery, []chainHeld{collector}, 3, 2, true},
	} {
		now = now.Add(step.after)
		h.note(step.found)
		c, f, cleared := warns("collector"), warns("file"), strings.Contains(logs.String(), "any longer")
		if c != step.collector || f != step.file || cleared != step.cleared {
			t.Fatalf("at %v: %d and %d WARN lines of collector and file, cleared said %v; want %d, %d, %v:\n%s",
				now, c, f, cleared, step.collector, step.file, step.cleared, logs)
		}
		got := h.bySink()
		want := map[string]uint64{"collector": 0, "file": 0}
		for _, ch := range step.found {
			for _, s := range ch.held {
				want[s.Sink] = s.Records
			}
		}
		if !maps.Equal(got, want) {
			t.Fatalf("at %v: held by sink %v, want %v", now, got, want)
		}
	}
}

// A retention pass that fails before it reads the sinks' cursors (the
// store did not answer) found nothing about them: what the last pass that
// read them found stands. The records a down sink holds stay served, and
// no INFO says that no sink holds records any longer.
func TestAFailedRetentionPassKeepsWhatTheSinksHeld(t *testing.T) {
	dir := t.TempDir()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + down.Addr().String() + "/v1/logs"
	down.Close()
	cfg, err := config.Parse(fmt.Appendf(nil, `store: {kind: memory}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
audit:
  retention: {max_records: 10, interval: 20ms}
  archive: %s
  sinks: [{name: collector, kind: otlp, endpoint: %q}]
`, filepath.Join(dir, "archive"), endpoint), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testbroker.SyncBuffer{}
	a, err := Open(t.Context(), cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Sinks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	var fail atomic.Bool
	d := &daemon{app: a, log: a.Log, reg: prometheus.NewRegistry(), consumer: &stoppingSource{a: a, n: 40}}
	d.retention, err = audit.NewRetention(a.Store.(audit.RetainStore), audit.RetentionOptions{
		Archive:    filepath.Join(dir, "archive"),
		MaxRecords: 10,
		Head:       a.retainHead,
		Cursors: func(ctx context.Context, head uint64) (map[string]uint64, error) {
			if fail.Load() {
				return nil, errors.New("read the audit sinks' cursors: connection refused")
			}
			return a.retainCursors(ctx, head)
		},
		Ages:   a.ages,
		Logger: a.Log,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(t, d)
	eventually(t, "the 30 records beyond max_records the sink holds served", func() bool {
		n, ok := gathered(t, d.reg, retentionHeld)
		return ok && n == 30
	})
	fail.Store(true)
	eventually(t, "two failed passes", func() bool {
		n, _ := gathered(t, d.reg, retentionFailures)
		return n >= 2
	})
	stop()
	if n, _ := gathered(t, d.reg, retentionHeld); n != 30 {
		t.Errorf("%s = %v after passes that read no cursor; want 30, what the last pass that read them found", retentionHeld, n)
	}
	if w := d.held.Load().warning(); !strings.Contains(w, "audit sink collector has yet to deliver 30 records") {
		t.Errorf("/readyz's warning after passes that read no cursor = %q; want it to name the sink's 30 records", w)
	}
	if strings.Contains(logs.String(), "no audit sink holds records beyond audit.retention.max_records any longer") {
		t.Errorf("an INFO said no sink holds records any longer, after passes that read no cursor:\n%s", logs)
	}
}

// On a shared store a pass that read no cursor of one chain keeps what the
// last pass found of that chain, and takes what it found of the others.
func TestAChainWhosePassReadNoCursorKeepsWhatItsSinksHeld(t *testing.T) {
	logs := &testbroker.SyncBuffer{}
	h := newHeldBySinks(slog.New(slog.NewTextHandler(logs, nil)), 10, []string{"collector"})
	h.note([]chainHeld{
		{chain: "m1", held: []audit.SinkHeld{{Sink: "collector", Cursor: 0, Records: 30}}},
		{chain: "m2", held: []audit.SinkHeld{{Sink: "collector", Cursor: 5, Records: 7}}},
	})
	h.note([]chainHeld{{chain: "m1", stale: true}, {chain: "m2"}})
	if got := h.bySink()["collector"]; got != 30 {
		t.Errorf("collector holds %d records after m1's pass read no cursor and m2's found none; want 30, m1's last finding", got)
	}
	if strings.Contains(logs.String(), "any longer") {
		t.Errorf("an INFO said no sink holds records any longer:\n%s", logs)
	}
}
