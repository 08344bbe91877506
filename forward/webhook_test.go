package forward_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/metrics"
)

// received is one POST a test server accepted.
type received struct {
	key, seq string
	header   http.Header
	body     string
}

// flakyHook accepts POSTs but answers some with 503, sleeps past the
// client's timeout on others, and refuses sequence 7 for good with 422.
type flakyHook struct {
	mu       sync.Mutex
	attempts map[string]int // by key
	got      []received
	slow     time.Duration
}

func (h *flakyHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key, seq := r.Header.Get("Idempotency-Key"), r.Header.Get("Replayguard-Sequence")
	h.mu.Lock()
	h.attempts[key]++
	first := h.attempts[key] == 1
	h.mu.Unlock()
	var n int
	fmt.Sscan(seq, &n)
	switch {
	case n == 7:
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"error":"unit U7 is unknown to dispatch"}`)
		return
	case first && n%3 == 0:
		http.Error(w, "dispatch is restarting", http.StatusServiceUnavailable)
		return
	case first && n%5 == 0:
		time.Sleep(h.slow) // accepted, but after the client gave up: it sends it again
	}
	h.mu.Lock()
	h.got = append(h.got, received{key: key, seq: seq, header: r.Header.Clone(), body: string(body)})
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *flakyHook) deliveries() []received {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]received(nil), h.got...)
}

// firstCopies keeps the first copy of each key, in arrival order.
func firstCopies(got []received) []received {
	seen := map[string]bool{}
	var out []received
	for _, g := range got {
		if !seen[g.key] {
			seen[g.key] = true
			out = append(out, g)
		}
	}
	return out
}

func TestWebhookDeliversInOrderThroughFailuresAndHoldsTheRefusedEntry(t *testing.T) {
	hook := &flakyHook{attempts: map[string]int{}, slow: 300 * time.Millisecond}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	wh, err := forward.NewWebhook(forward.WebhookOptions{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.NewForward(reg, engine.OutputWebhook)
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL + "/dispatch"}, map[string]forward.Output{engine.OutputWebhook: wh},
		// Poll: the depth Run counts at its start may include the first
		// commit twice (a count errs on the high side until the next).
		forward.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Poll: 50 * time.Millisecond, Observer: m})
	m.WatchOutbox(r.d)
	r.run()
	ctx := context.Background()
	const n = 20
	var keys []string
	for seq := 1; seq <= n; seq += 4 {
		var batch []engine.Message
		for s := seq; s < seq+4; s++ {
			batch = append(batch, incident("e1", s))
		}
		keys = append(keys, r.keys(ctx, batch...)...)
	}
	r.process(ctx, incident("e1", 4), incident("e1", 9)) // replays: duplicates, never forwarded
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	waitFor(t, "the drainer counting it empty", func() bool { n, _ := r.d.Depth(); return n == 0 })

	got := firstCopies(hook.deliveries())
	var seqs []string
	for _, g := range got {
		seqs = append(seqs, g.seq)
	}
	want := "1 2 3 4 5 6 8 9 10 11 12 13 14 15 16 17 18 19 20"
	if strings.Join(seqs, " ") != want {
		t.Fatalf("first copies arrived as %v, want %s", seqs, want)
	}
	applied := map[string]bool{}
	for _, k := range keys {
		applied[k] = true
	}
	for _, g := range hook.deliveries() {
		if !applied[g.key] {
			t.Fatalf("sequence %s was forwarded under key %s, which no applied decision has", g.seq, g.key)
		}
	}
	if len(hook.deliveries()) <= len(got) {
		t.Fatalf("no copy was sent twice: the slow answers should have been retried")
	}
	g := got[0]
	wantKey := keys[0]
	if g.key != wantKey || g.header.Get("Replayguard-Key") != wantKey || g.header.Get("Replayguard-Route") != "incidents" ||
		g.header.Get("Replayguard-Source") != `["fd","e1"]` || g.header.Get("Replayguard-Epoch") != "1" ||
		g.header.Get("Content-Type") != "application/json" || g.body != string(incident("e1", 1).Payload) {
		t.Fatalf("first delivery: key %s (want %s), headers %v, body %s", g.key, wantKey, g.header, g.body)
	}

	held, _ := r.store.OutboxHeld(ctx)
	if len(held) != 1 || held[0].Sequence != 7 || !strings.Contains(held[0].Reason, "422") ||
		!strings.Contains(held[0].Reason, "unit U7 is unknown to dispatch") {
		t.Fatalf("held: %+v", held)
	}
	var rec *engine.AuditRecord
	r.store.ScanAudit(ctx, 1, func(a engine.AuditRecord) error {
		if a.Outcome == engine.OutcomeForwardHeld {
			rec = &a
		}
		return nil
	})
	if rec == nil || rec.Ref != held[0].ID || rec.Key != held[0].Key || !strings.Contains(rec.Reason, "webhook "+srv.URL) {
		t.Fatalf("audit record of the hold: %+v, held entry %d", rec, held[0].ID)
	}
	want = fmt.Sprintf(`
# HELP replayguard_forwarded_total Outbox entries by output and result: delivered (acknowledged downstream; a copy sent again after a crash counts again), held (refused for good, or held by an operator while pending; audited as forward_held), failed (an attempt that failed, counted at the entry it stopped at; sent again).
# TYPE replayguard_forwarded_total counter
replayguard_forwarded_total{output="webhook",result="delivered"} %d
replayguard_forwarded_total{output="webhook",result="failed"} %d
replayguard_forwarded_total{output="webhook",result="held"} 1
# HELP replayguard_outbox_entries Pending forward entries in this member's outbox: committed, not yet acknowledged downstream.
# TYPE replayguard_outbox_entries gauge
replayguard_outbox_entries 0
`, n-1, failedEntries(t, reg))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "replayguard_forwarded_total", "replayguard_outbox_entries"); err != nil {
		t.Fatal(err)
	}
	if st := r.d.Status(); st.Outputs[0].Failures == 0 || st.Outputs[0].Failing {
		t.Fatalf("status after recovery: %+v", st)
	}
	if retries := counterValue(t, reg, "replayguard_forward_retries_total"); retries == 0 {
		t.Fatal("no retry counted")
	}
	// One POST at a time: an attempt that failed failed one entry, not
	// every entry waiting behind it.
	if failed, posts := failedEntries(t, reg), len(hook.deliveries()); failed > posts {
		t.Fatalf("%d entries counted failed after %d POSTs", failed, posts)
	}
}

func TestWebhookAnswerExcerptIsBoundedAndOnOneLine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "line one\nline two "+strings.Repeat("x", 1000))
	}))
	defer srv.Close()
	wh, _ := forward.NewWebhook(forward.WebhookOptions{})
	defer wh.Close()
	n, err := wh.Deliver(context.Background(), []engine.OutboxEntry{{ID: 1, Target: srv.URL, Payload: []byte(`{}`)}})
	ref, ok := err.(*forward.RefusedError)
	if n != 0 || !ok || ref.Index != 0 || strings.Contains(ref.Reason, "\n") || len(ref.Reason) > 300 ||
		!strings.HasPrefix(ref.Reason, "HTTP 400 Bad Request: line one line two xxx") {
		t.Fatalf("n %d, err %v", n, err)
	}
	b, _ := json.Marshal(ref.Reason)
	t.Logf("reason: %s", b)
}

// failedEntries is what replayguard_forwarded_total{result="failed"} says,
// which must be more than 0 after the test's failures.
func failedEntries(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	n := int(forwardedValue(t, reg, engine.OutputWebhook, metrics.ForwardFailed))
	if n == 0 {
		t.Fatal("no failed entries counted")
	}
	return n
}

// counterValue sums the series of a counter.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestWebhookTellsTheEndpointsAnswersFromTheEntrys: a 4xx that says the
// output's credentials or the receiver's timing are wrong fails the
// attempt (the next entries would get it too: holding one after another
// would pile them up and reorder them once retried); one about the entry,
// or its route's URL, holds it.
func TestWebhookTellsTheEndpointsAnswersFromTheEntrys(t *testing.T) {
	for _, tc := range []struct {
		status int
		held   bool
	}{
		{401, false}, {407, false}, {408, false}, {409, false}, {425, false}, {429, false}, {500, false}, {503, false},
		{400, true}, {403, true}, {404, true}, {413, true}, {415, true}, {422, true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.status) }))
		wh, _ := forward.NewWebhook(forward.WebhookOptions{})
		n, err := wh.Deliver(context.Background(), []engine.OutboxEntry{{ID: 1, Target: srv.URL, Payload: []byte(`{}`)}})
		var ref *forward.RefusedError
		if held := errors.As(err, &ref); n != 0 || err == nil || held != tc.held {
			t.Errorf("HTTP %d: %d delivered, %v; want held %v", tc.status, n, err, tc.held)
		}
		wh.Close()
		srv.Close()
	}
}

// TestWebhookURLsPasswordStaysOutOfTheHoldTheLogAndTheErrors: a webhook
// URL's password (the only place a webhook's basic credentials go) is
// never written to the audit record of a hold, the held entry's reason,
// a log line or an attempt's error.
func TestWebhookURLsPasswordStaysOutOfTheHoldTheLogAndTheErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "@") {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer srv.Close()
	hook := strings.Replace(srv.URL, "http://", "http://dispatch:s3cret@", 1)

	wh, err := forward.NewWebhook(forward.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	_, err = wh.Deliver(context.Background(), []engine.OutboxEntry{{ID: 1, Target: hook + "/units/@e7", Payload: []byte(`{}`)}})
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "xxxxx@127.0.0.1") {
		t.Fatalf("attempt's error: %v", err)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	_, err = wh.Deliver(context.Background(), []engine.OutboxEntry{{ID: 1, Target: strings.Replace(closed.URL, "http://", "http://t0ken@", 1), Payload: []byte(`{}`)}})
	if err == nil || strings.Contains(err.Error(), "t0ken") {
		t.Fatalf("attempt's error: %v", err)
	}

	var logged strings.Builder
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logged.Write(p)
	}), nil))
	r := newRig(t, engine.ForwardSpec{Webhook: hook + "/hook"}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{Poll: 50 * time.Millisecond, Logger: log})
	r.run()
	ctx := context.Background()
	r.keys(ctx, incident("e1", 1))
	waitFor(t, "the entry held", func() bool { h, _ := r.store.OutboxHeld(ctx); return len(h) == 1 })
	held, _ := r.store.OutboxHeld(ctx)
	var rec engine.AuditRecord
	r.store.ScanAudit(ctx, 1, func(a engine.AuditRecord) error {
		if a.Outcome == engine.OutcomeForwardHeld {
			rec = a
		}
		return nil
	})
	r.stop()
	logMu.Lock()
	defer logMu.Unlock()
	for what, s := range map[string]string{"audit reason": rec.Reason, "held reason": held[0].Reason, "log": logged.String()} {
		if strings.Contains(s, "s3cret") || !strings.Contains(s, "xxxxx@127.0.0.1") {
			t.Errorf("%s: %s", what, s)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestWebhookWaitsAsTheReceiverAsks: a receiver under load answers 429
// with Retry-After; the lane waits that long before it posts again,
// however short its own backoff (here 5-40 ms), then delivers the entry.
func TestWebhookWaitsAsTheReceiverAsks(t *testing.T) {
	var posts atomic.Int64
	busy := atomic.Bool{}
	busy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		posts.Add(1)
		if busy.Load() {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	wh, err := forward.NewWebhook(forward.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL + "/dispatch"}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Poll: 50 * time.Millisecond})
	r.run()
	ctx := context.Background()
	r.keys(ctx, incident("e1", 1))
	waitFor(t, "the first post", func() bool { return posts.Load() > 0 })
	time.Sleep(1500 * time.Millisecond)
	if n := posts.Load(); n != 1 {
		t.Fatalf("%d posts within 1.5 s of a 429 asking for 2 s; want the first only", n)
	}
	busy.Store(false)
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
}

// A copy whose payload is not JSON (a Sparkplug route's protobuf) is not
// sent as JSON.
func TestWebhookSendsAProtobufPayloadAsOctets(t *testing.T) {
	types := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		types <- r.Header.Get("Content-Type")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	wh, _ := forward.NewWebhook(forward.WebhookOptions{})
	defer wh.Close()
	entries := []engine.OutboxEntry{{ID: 1, Target: srv.URL, Payload: []byte(`{"kwh":1}`)}, {ID: 2, Target: srv.URL, Payload: []byte{0x08, 0x96, 0x01, 0x10, 0x05}}}
	if n, err := wh.Deliver(context.Background(), entries); n != 2 || err != nil {
		t.Fatalf("Deliver = %d, %v", n, err)
	}
	if json, proto := <-types, <-types; json != "application/json" || proto != "application/octet-stream" {
		t.Fatalf("Content-Type %q for JSON, %q for protobuf", json, proto)
	}
}

// TestWebhookRedirectIsHeldSayingWhereTo: a receiver that moved answers a
// POST with a redirect, which the webhook does not follow (a redirected
// POST can lose its body): the entry is held, and the reason says where the
// receiver points (its password, if any, left out) and which setting to
// change.
func TestWebhookRedirectIsHeldSayingWhereTo(t *testing.T) {
	for _, status := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://rg:s3cret@dispatch.example/v2/hook", status)
		}))
		wh, _ := forward.NewWebhook(forward.WebhookOptions{})
		n, err := wh.Deliver(context.Background(), []engine.OutboxEntry{{ID: 1, Target: srv.URL, Payload: []byte(`{}`)}})
		var ref *forward.RefusedError
		if n != 0 || !errors.As(err, &ref) {
			t.Errorf("HTTP %d: %d delivered, %v; want the entry held", status, n, err)
		} else if want := "to https://xxxxx@dispatch.example/v2/hook (a POST is not redirected: change the forward's webhook URL for the copies to come; this entry keeps the URL it was written with"; !strings.Contains(ref.Reason, want) || strings.Contains(ref.Reason, "s3cret") {
			t.Errorf("HTTP %d: reason %q; want it to say %q", status, ref.Reason, want)
		}
		wh.Close()
		srv.Close()
	}
}
