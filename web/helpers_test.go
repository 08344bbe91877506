package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/store/memory"
)

var testRoutes = []engine.Route{
	{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"},
		Sequence: "sequence", Epoch: "boot_id",
		Effects: []engine.EffectSpec{
			{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"}},
			{Entity: "unit/{unit_id}", Set: map[string]string{"status": "unit_status"}},
		}},
	{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}},
}

// observers fans a commit out to several observers, in order, with its
// outbox entries and resolutions to those that hear them (a drainer).
type observers []engine.Observer

func (o observers) Committed(r []engine.AuditRecord, e []engine.EntityState) {
	for _, x := range o {
		x.Committed(r, e)
	}
}

func (o observers) OutboxCommitted(entries []engine.OutboxEntry) {
	for _, x := range o {
		if oo, ok := x.(engine.OutboxObserver); ok {
			oo.OutboxCommitted(entries)
		}
	}
}

func (o observers) OutboxResolved(rs []engine.OutboxResolve) {
	for _, x := range o {
		if ro, ok := x.(engine.OutboxResolveObserver); ok {
			ro.OutboxResolved(rs)
		}
	}
}

func (o observers) OutboxHolds(held []engine.OutboxHold) {
	for _, x := range o {
		if ho, ok := x.(engine.OutboxHoldObserver); ok {
			ho.OutboxHolds(held)
		}
	}
}

// fixture is a real engine over a memory store behind the server.
type fixture struct {
	t       *testing.T
	store   *memory.Store
	eng     *engine.Engine
	hub     *Hub
	metrics *metrics.Metrics
	reg     *prometheus.Registry
	ready   atomic.Bool
	status  atomic.Pointer[StoreStatus] // what /readyz says besides Ready; nil: nothing
	srv     *Server
	http    *httptest.Server
	seq     map[string]int64
	drainer *forward.Drainer // nil unless newForwardingFixture
}

// newFixture starts the server over a fresh engine; opts adjust the
// engine's options (its clock, say).
func newFixture(t *testing.T, cfg Config, opts ...func(*engine.Options)) *fixture {
	t.Helper()
	return startFixture(t, cfg, nil, opts...)
}

// newForwardingFixture is newFixture with a drainer delivering the
// store's outbox through outputs while the test runs, as `run` wires it:
// woken by the engine's commits, holding back batches when the outbox is
// full, its state in /api/v1/forward.
func newForwardingFixture(t *testing.T, cfg Config, fo forward.Options, opts ...func(*engine.Options)) *fixture {
	t.Helper()
	return startFixture(t, cfg, &fo, opts...)
}

func startFixture(t *testing.T, cfg Config, fo *forward.Options, opts ...func(*engine.Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, store: memory.New(), hub: NewHub(), reg: prometheus.NewRegistry(), seq: map[string]int64{}}
	f.metrics = metrics.New(f.reg, "test", "0000000", "incidents", "meters")
	o := engine.Options{Routes: testRoutes, SequenceSpan: 64, Observer: observers{f.metrics, f.hub}}
	var err error
	if fo != nil {
		fo.Store = f.store
		if fo.Logger == nil {
			fo.Logger = testLogger(t)
		}
		if f.drainer, err = forward.New(*fo); err != nil {
			t.Fatal(err)
		}
		o.Observer, o.Admit = observers{f.metrics, f.hub, f.drainer}, f.drainer.Admit
	}
	for _, opt := range opts {
		opt(&o)
	}
	f.eng, err = engine.New(context.Background(), f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.eng.Close() })
	deps := Deps{Engine: f.eng, Audit: f.store, Quarantine: f.store, Gatherer: f.reg,
		Ready: f.ready.Load, Hub: f.hub, Outbox: f.eng, Store: func() StoreStatus {
			if st := f.status.Load(); st != nil {
				return *st
			}
			return StoreStatus{}
		}}
	if f.drainer != nil {
		f.runDrainer()
		deps.Forward = forwardStatus(f.drainer)
	}
	f.metrics.Watch(f.eng)
	f.metrics.WatchQuarantine(f.store)
	f.ready.Store(true)
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	f.srv = New(cfg, deps)
	f.http = httptest.NewServer(f.srv.Handler())
	t.Cleanup(f.http.Close)
	return f
}

// runDrainer runs the drainer until the test ends, stopping it (and
// closing its outputs) before the engine closes.
func (f *fixture) runDrainer() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.drainer.Run(ctx, f.eng)
	}()
	f.t.Cleanup(func() {
		cancel()
		<-done
		f.drainer.Close()
	})
}

// forwardStatus is d's state as internal/app hands it to the server.
func forwardStatus(d *forward.Drainer) func() ForwardStatus {
	return func() ForwardStatus {
		st := d.Status()
		out := ForwardStatus{Member: st.Member, Depth: st.Depth, MaxEntries: st.MaxEntries, Full: st.Full,
			FullSince: st.FullSince, Outputs: make([]ForwardOutput, len(st.Outputs))}
		for i, o := range st.Outputs {
			out.Outputs[i] = ForwardOutput{Output: o.Output, Member: o.Member, Delivered: o.Delivered, Held: o.Held,
				Failures: o.Failures, Failing: o.Failing, Since: o.Since, Attempts: o.Attempts, LastError: o.LastError,
				Stuck: ForwardStuck(o.Stuck)}
		}
		return out
	}
}

// process feeds messages to the engine as a source would.
func (f *fixture) process(msgs ...engine.Message) []engine.Decision {
	f.t.Helper()
	f.metrics.Received(len(msgs))
	decs, err := f.eng.Process(context.Background(), msgs)
	if err != nil {
		f.t.Fatal(err)
	}
	return decs
}

// incident is an incidents message from fire/e7; seq < 0 takes the next one.
func incident(seq int64, incidentID string, casualties int, unitStatus string) engine.Message {
	p := fmt.Sprintf(`{"agency":"fire","source_id":"e7","boot_id":1,"sequence":%d,"incident_id":%q,"casualty_delta":%d,"unit_id":"e7","unit_status":%q}`,
		seq, incidentID, casualties, unitStatus)
	return engine.Message{Topic: "incidents/fire/e7", Payload: []byte(p), Broker: "tcp://127.0.0.1:1883"}
}

func meter(id string, kwh string) engine.Message {
	return engine.Message{Topic: "plant/meter-3/energy", Payload: []byte(fmt.Sprintf(`{"msgId":%q,"kwh":%s}`, id, kwh))}
}

type response struct {
	code   int
	header http.Header
	body   []byte
}

func (f *fixture) do(method, path, body string, header ...string) response {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.http.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := f.http.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, b}
}

func (f *fixture) get(path string, header ...string) response {
	return f.do("GET", path, "", header...)
}

func (f *fixture) post(path, body string, header ...string) response {
	return f.do("POST", path, body, append([]string{"Content-Type", "application/json"}, header...)...)
}

// want checks the status and, for an error status, that the body is a JSON
// error; it decodes a success body into v when v is not nil.
func (r response) want(t *testing.T, code int, v any) {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d; body %s", r.code, code, r.body)
	}
	if code >= 400 {
		var e apiError
		if err := json.Unmarshal(r.body, &e); err != nil || e.Error == "" {
			t.Fatalf("error body %q is not a JSON error (%v)", r.body, err)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("error Content-Type %q", ct)
		}
		return
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("body %s: %v", r.body, err)
		}
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
