package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
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

// stoppingSource decides n readings of its own meter while it runs and,
// once its context is done, m more: the deliveries it had in hand,
// committed as it stops, a moment after the rest of the daemon heard the
// stop.
type stoppingSource struct {
	a    *App
	n, m int
}

func (s *stoppingSource) Run(ctx context.Context) error {
	if err := s.decide(0, s.n); err != nil {
		return err
	}
	<-ctx.Done()
	time.Sleep(50 * time.Millisecond)
	return s.decide(s.n, s.m)
}

// decide is the package's decide, from the source's goroutine.
func (s *stoppingSource) decide(from, n int) error {
	msgs := make([]engine.Message, 0, n)
	for i := from; i < from+n; i++ {
		msgs = append(msgs, engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m1-%d"}`, i)})
	}
	_, err := s.a.Engine.Process(context.Background(), msgs)
	return err
}

func (s *stoppingSource) Ready() bool { return true }

func (s *stoppingSource) NotReady() string { return "" }

// serveUntilStopped serves d, stops it as SIGTERM would, and returns how
// long serve took to return after the stop.
func serveUntilStopped(t *testing.T, d *daemon) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.serve(ctx) }()
	time.Sleep(50 * time.Millisecond)
	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return within 10s of its stop")
	}
	return time.Since(stopped)
}

// A planned stop of run delivers to the audit sinks what they have not
// sent, the decisions committed as the consumer stopped too, before the
// sinks' exporters close; a sink whose receiver is down holds the stop up
// no longer than the flush's bound, and its cursor keeps the rest.
func TestRunDeliversToTheSinksWhatIsLeftAtItsStop(t *testing.T) {
	open := func(t *testing.T, sinkPath string) (*App, *testbroker.SyncBuffer) {
		cfg, err := config.Parse(fmt.Appendf(nil, `store: {kind: memory}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
audit:
  sinks: [{name: jsonl, kind: file, path: %s}]
`, sinkPath), "rg.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		logs := &testbroker.SyncBuffer{}
		a, err := Open(t.Context(), cfg, Options{Sinks: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a, logs
	}

	t.Run("what is decided up to the stop reaches the sink", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "audit.jsonl")
		a, _ := open(t, file)
		d := &daemon{app: a, log: a.Log, reg: prometheus.NewRegistry(), sinkFlush: 5 * time.Second}
		d.consumer = &stoppingSource{a: a, n: 25, m: 12}
		serveUntilStopped(t, d)
		if got := sinkChains(t, file)[""]; inOrder(got, 37) != "" {
			t.Fatalf("the file sink holds %s: %v", inOrder(got, 37), got)
		}
	})

	t.Run("a sink that is down holds the stop up no longer than the bound", func(t *testing.T) {
		// The sink's directory goes away once run started (a mount
		// lost): run refuses one missing at start.
		dir := filepath.Join(t.TempDir(), "gone")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		a, logs := open(t, filepath.Join(dir, "audit.jsonl"))
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		d := &daemon{app: a, log: a.Log, reg: prometheus.NewRegistry(), sinkFlush: 300 * time.Millisecond}
		d.consumer = &stoppingSource{a: a, n: 5, m: 5}
		if took := serveUntilStopped(t, d); took > 3*time.Second {
			t.Fatalf("the stop took %v with the sink's receiver down", took)
		}
		if !strings.Contains(logs.String(), "delivered up to 0 of 10") {
			t.Fatalf("the records left to the cursor were not logged:\n%s", logs.String())
		}
	})
}

// A planned stop of run while a receiver holds a batch lets that batch
// land, then delivers the rest: every record once, none sent again; on a
// single-owner store and, for the member's chain, on a shared one.
func TestRunsStopSendsNoRecordTwice(t *testing.T) {
	for _, tc := range []struct {
		name, store string
		open        func(*config.Config) (*App, error)
	}{
		{"a single-owner store", "{kind: memory}", func(cfg *config.Config) (*App, error) {
			return Open(t.Context(), cfg, Options{Sinks: true, Logger: slog.New(slog.DiscardHandler)})
		}},
		{"a group member", "{kind: postgres, url: 'postgres://db/rg', member: m1}", func(cfg *config.Config) (*App, error) {
			h, err := memory.NewGroup(0, 0).Open("m1")
			if err != nil {
				return nil, err
			}
			return openOn(t.Context(), cfg, cfg.Store, h, Options{Sinks: true, Logger: slog.New(slog.DiscardHandler)}, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			coll := &slowCollector{t: t, delay: 300 * time.Millisecond}
			srv := httptest.NewServer(coll)
			defer srv.Close()
			cfg, err := config.Parse(fmt.Appendf(nil, `store: %s
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
audit:
  sinks: [{name: siem, kind: otlp, endpoint: '%s/v1/logs'}]
`, tc.store, srv.URL), "rg.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := tc.open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			c, err := a.chainWork() // nil on a single-owner store
			if err != nil {
				t.Fatal(err)
			}
			d := &daemon{app: a, log: a.Log, reg: prometheus.NewRegistry(), chains: c, sinkFlush: 5 * time.Second}
			d.consumer = &stoppingSource{a: a, n: 25, m: 12} // the stop comes 50 ms into the receiver's 300 ms on 1..25
			serveUntilStopped(t, d)
			if why := coll.took(37); why != "" {
				t.Fatalf("the receiver, once run stopped: %s", why)
			}
		})
	}
}

// On a shared store the member's sinks deliver its chain up to what it
// committed as it stopped, before its chain claim is released.
func TestRunOnAGroupDeliversItsChainToTheSinksAtItsStop(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m1.jsonl")
	g := memory.NewGroup(0, 0)
	a := groupMember(t, g, "m1", filepath.Join(dir, "archive"), file)
	c, err := a.chainWork()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{app: a, log: a.Log, reg: prometheus.NewRegistry(), chains: c, sinkFlush: 5 * time.Second}
	d.consumer = &stoppingSource{a: a, n: 25, m: 12}
	serveUntilStopped(t, d)
	if got := sinkChains(t, file)["m1"]; inOrder(got, 37) != "" {
		t.Fatalf("the file sink holds m1's chain %s: %v", inOrder(got, 37), got)
	}
}
