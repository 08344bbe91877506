package app

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
)

// leaveWebhookEntries ingests three meter readings forwarded to a
// receiver that answers 503, so that their entries stay pending in the
// embedded store at dir, and returns the receiver, which answers 204 once
// told (ok) and counts what it took. It returns once the receiver has
// answered every request of the ingest: a request the ingest gave up on
// at its drain timeout may reach the handler later, after ok, and count
// as a copy the next process delivers again.
func leaveWebhookEntries(t *testing.T, dir string) (url string, ok *atomic.Bool, took *atomic.Int64) {
	t.Helper()
	ok, took = new(atomic.Bool), new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ok.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		took.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	var open atomic.Int64 // connections not yet closed
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	defer quiesce(t, srv, &open)
	cfg := parseConfig(t, dir, fmt.Sprintf(`
      - forward: {webhook: %q}
outputs: {webhook: {max_backoff: 100ms}}
`, srv.URL+"/hook"))
	tool := &Tool{Config: cfg, Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
	var feed strings.Builder
	for i := range 3 {
		fmt.Fprintf(&feed, `{"topic":"plant/m1/energy","payload":{"msgId":"m1-%d","kwh":1}}`+"\n", i)
	}
	if err := tool.Ingest(t.Context(), IngestOptions{Input: strings.NewReader(feed.String()), Name: "feed", DrainTimeout: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if e := tool.Err.(*bytes.Buffer).String(); !strings.Contains(e, "3 still pending in the outbox") {
		t.Fatalf("ingest left no webhook entries pending: %q", e)
	}
	return srv.URL, ok, took
}

// quiesce closes srv's connections and waits until each has ended, its
// request answered if the handler had it.
func quiesce(t *testing.T, srv *httptest.Server, open *atomic.Int64) {
	t.Helper()
	srv.CloseClientConnections()
	deadline := time.Now().Add(10 * time.Second)
	for open.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver still has %d connections 10s after they were closed", open.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// parseConfig is a meters route on an embedded store in dir, with the
// effects and settings of tail after its entity effect.
func parseConfig(t *testing.T, dir, tail string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, `
store: {kind: embedded, path: %q}
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects:
      - entity: "meter/{topic[1]}"
        add: {kwh: kwh}%s`, filepath.Join(dir, "data"), tail), "meters.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestEntriesOfAnOutputNoLongerConfiguredAreNamedAsWaiting: a route's
// webhook forward is removed while its entries wait in the outbox; the
// next process, forwarding to NATS only, neither delivers them nor may
// pass over them silently: its readiness names the webhook output as
// failing at the first of them, and says what to set.
func TestEntriesOfAnOutputNoLongerConfiguredAreNamedAsWaiting(t *testing.T) {
	dir := t.TempDir()
	leaveWebhookEntries(t, dir)
	cfg := parseConfig(t, dir, `
      - forward: {nats: "cop.meters"}
outputs: {nats: {url: "nats://127.0.0.1:1"}}
`)
	a, err := Open(t.Context(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	stop := a.startForward(t.Context())
	defer stop()
	ready := a.readiness(nil)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(ready().Warning, "webhook output failing") {
		if time.Now().After(deadline) {
			t.Fatalf("readiness after 10s with 3 webhook entries pending and no webhook output: %+v, forward status %+v", ready(), a.Forward.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	w := ready().Warning
	for _, want := range []string{"no route forwards to webhook nor does the file name outputs.webhook", "name outputs.webhook", "(at entry ", "3 of 100000 outbox entries pending"} {
		if !strings.Contains(w, want) {
			t.Errorf("readiness warning lacks %q: %s", want, w)
		}
	}
}

// TestEntriesOfAForwardRemovedAreDeliveredWhileTheFileNamesItsOutput: a
// route's webhook forward is removed while its entries wait; the file
// still names outputs.webhook, so the next process delivers them.
func TestEntriesOfAForwardRemovedAreDeliveredWhileTheFileNamesItsOutput(t *testing.T) {
	dir := t.TempDir()
	_, ok, took := leaveWebhookEntries(t, dir)
	ok.Store(true)
	cfg := parseConfig(t, dir, `
      - forward: {nats: "cop.meters"}
outputs: {nats: {url: "nats://127.0.0.1:1"}, webhook: {timeout: 5s}}
`)
	a, err := Open(t.Context(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	stop := a.startForward(t.Context())
	defer stop()
	if left, err := a.FlushForward(t.Context(), 10*time.Second); err != nil || left != 0 {
		t.Fatalf("flush: %d left, %v; forward status %+v", left, err, a.Forward.Status())
	}
	if n := took.Load(); n != 3 {
		t.Fatalf("the receiver took %d copies, want 3", n)
	}
}

// TestEntriesLeftWithoutAnyForwardOrOutputAreWarnedOfAtStart: with no
// forward left in the routes and no output named, nothing drains the
// outbox; opening the store says that its pending entries are not
// delivered.
func TestEntriesLeftWithoutAnyForwardOrOutputAreWarnedOfAtStart(t *testing.T) {
	dir := t.TempDir()
	leaveWebhookEntries(t, dir)
	logs := &bytes.Buffer{}
	a, err := Open(t.Context(), parseConfig(t, dir, "\n"), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Forward != nil {
		t.Fatalf("a drainer without outputs")
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "they are not delivered") || !strings.Contains(l, "pending=3") {
		t.Fatalf("log at open: %s", l)
	}
}

// TestAnOutputNamedWithoutAForwardThatCannotBeBuiltLetsTheProcessStart:
// an output the file names but no route forwards to is built only for
// the entries an earlier configuration left; when its settings cannot be
// used (a CA file that is not there), the process starts all the same
// and its entries wait, the output failing with why.
func TestAnOutputNamedWithoutAForwardThatCannotBeBuiltLetsTheProcessStart(t *testing.T) {
	dir := t.TempDir()
	leaveWebhookEntries(t, dir)
	cfg := parseConfig(t, dir, fmt.Sprintf(`
      - forward: {nats: "cop.meters"}
outputs: {nats: {url: "nats://127.0.0.1:1"}, webhook: {tls: {ca_file: %q}}}
`, filepath.Join(dir, "no-such-ca.pem")))
	a, err := Open(t.Context(), cfg, Options{})
	if err != nil {
		t.Fatalf("open with outputs.webhook unusable and no webhook forward: %v", err)
	}
	defer a.Close()
	stop := a.startForward(t.Context())
	defer stop()
	ready := a.readiness(nil)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(ready().Warning, "outputs.webhook cannot deliver them") {
		if time.Now().After(deadline) {
			t.Fatalf("readiness after 10s: %+v", ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
