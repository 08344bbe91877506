package web

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
)

// withAlerts adds a route whose applied messages are forwarded to a
// webhook.
func withAlerts(o *engine.Options) {
	o.Routes = append(o.Routes, engine.Route{Name: "alerts", Topic: "alerts/#", Source: []string{"unit"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Webhook: "https://dispatch.example/hook"}}}})
}

// heldAlerts forwards n alerts and holds each entry as a refusing webhook
// would; it returns them.
func (f *fixture) heldAlerts(n int) []engine.OutboxEntry {
	f.t.Helper()
	for i := range n {
		f.process(engine.Message{Topic: "alerts/u7", Payload: fmt.Appendf(nil, `{"unit":"u7","msgId":"a-%d"}`, i)})
	}
	es, err := f.store.Outbox(context.Background(), "", 0, 100)
	if err != nil || len(es) != n {
		f.t.Fatalf("outbox: %d entries, %v", len(es), err)
	}
	for _, e := range es {
		if err := f.eng.HoldForward(context.Background(), "", e, `HTTP 422 Unprocessable Entity: {"error":"unit u7 is unknown"}`); err != nil {
			f.t.Fatal(err)
		}
	}
	return es
}

func TestOutboxAPI(t *testing.T) {
	viewer, operator := []string{"Authorization", "Bearer v13wer"}, []string{"Authorization", "Bearer 0perator"}
	t.Run("the list shows the held entries with the downstream's answer, and the pending ones", func(t *testing.T) {
		f := newFixture(t, Config{}, withAlerts)
		es := f.heldAlerts(1)
		f.process(engine.Message{Topic: "alerts/u8", Payload: []byte(`{"unit":"u8","msgId":"b-1"}`)}) // pending
		var page OutboxPage
		f.get("/api/v1/outbox").want(t, http.StatusOK, &page)
		if len(page.Held) != 1 || page.TotalHeld != 1 || page.Next != nil {
			t.Fatalf("page: %+v", page)
		}
		h := page.Held[0]
		if h.ID != es[0].ID || h.Member != "" || h.Output != engine.OutputWebhook || h.Target != "https://dispatch.example/hook" ||
			h.Route != "alerts" || h.Topic != "alerts/u7" || h.Key != es[0].Key.String() || !strings.Contains(h.Reason, "unit u7 is unknown") ||
			!h.Time.Equal(es[0].Time) || !strings.Contains(string(h.Payload), `"msgId": "a-0"`) ||
			h.PayloadB64 != base64.StdEncoding.EncodeToString(es[0].Payload) {
			t.Fatalf("held item: %+v", h)
		}
		if len(page.Pending) != 1 || page.Pending[0].Member != "" || page.Pending[0].Pending != 1 ||
			page.Pending[0].Oldest == nil || page.Pending[0].Oldest.Target != "https://dispatch.example/hook" {
			t.Fatalf("pending: %+v", page.Pending)
		}
	})
	t.Run("the list pages by member and id", func(t *testing.T) {
		f := newFixture(t, Config{}, withAlerts)
		es := f.heldAlerts(5)
		var got []uint64
		path := "/api/v1/outbox?limit=2"
		for range 10 {
			var page OutboxPage
			f.get(path).want(t, http.StatusOK, &page)
			for _, h := range page.Held {
				got = append(got, h.ID)
			}
			if page.Next == nil {
				break
			}
			path = fmt.Sprintf("/api/v1/outbox?limit=2&member=%s&from=%d", page.Next.Member, page.Next.ID)
		}
		if len(got) != len(es) {
			t.Fatalf("pages listed %v, want the %d held entries", got, len(es))
		}
		for i, e := range es {
			if got[i] != e.ID {
				t.Fatalf("pages listed %v", got)
			}
		}
		f.get("/api/v1/outbox?limit=0").want(t, http.StatusBadRequest, nil)
	})
	t.Run("a viewer may neither retry nor drop; an operator may, and the audit names them", func(t *testing.T) {
		f := newFixture(t, Config{Tokens: namedTokens}, withAlerts)
		es := f.heldAlerts(2)
		r := f.post(fmt.Sprintf("/api/v1/outbox/%d/retry", es[0].ID), "", viewer...)
		r.want(t, http.StatusForbidden, nil)
		if !strings.Contains(string(r.body), "role viewer may not retry or drop") {
			t.Fatalf("403 body %s", r.body)
		}
		f.post(fmt.Sprintf("/api/v1/outbox/%d/drop", es[0].ID), `{"reason":"x"}`).want(t, http.StatusUnauthorized, nil)
		var res forwardResolution
		f.post(fmt.Sprintf("/api/v1/outbox/%d/retry", es[0].ID), "", operator...).want(t, http.StatusOK, &res)
		if res.ID != es[0].ID || res.Outcome != engine.OutcomeForwardRetried || res.Operator != "j.doe" ||
			res.Output != engine.OutputWebhook || res.Key != es[0].Key.String() || res.Position == 0 {
			t.Fatalf("retry: %+v", res)
		}
		if n, _ := f.store.OutboxDepth(context.Background(), ""); n != 1 {
			t.Fatalf("%d entries pending after the retry, want 1", n)
		}
		f.post(fmt.Sprintf("/api/v1/outbox/%d/retry", es[0].ID), "{}", operator...).want(t, http.StatusNotFound, nil)
		f.post(fmt.Sprintf("/api/v1/outbox/%d/drop", es[1].ID), `{"reason":"  "}`, operator...).want(t, http.StatusBadRequest, nil)
		f.post(fmt.Sprintf("/api/v1/outbox/%d/drop", es[1].ID), ``, operator...).want(t, http.StatusBadRequest, nil)
		f.post(fmt.Sprintf("/api/v1/outbox/%d/drop", es[1].ID), `{"reason":"x","extra":1}`, operator...).want(t, http.StatusBadRequest, nil)
		f.post("/api/v1/outbox/0/drop", `{"reason":"x"}`, operator...).want(t, http.StatusBadRequest, nil)
		f.post(fmt.Sprintf("/api/v1/outbox/%d/drop", es[1].ID), `{"reason":"entered by hand"}`,
			"Authorization", "Bearer 0perator2").want(t, http.StatusOK, &res)
		if res.Outcome != engine.OutcomeForwardDropped || res.Operator != "a.smith" || res.Reason != "entered by hand" {
			t.Fatalf("drop: %+v", res)
		}
		var page auditPage
		f.get("/api/v1/audit?outcome=forward_dropped").want(t, http.StatusOK, &page)
		if len(page.Records) != 1 || page.Records[0].Ref != es[1].ID || page.Records[0].Operator != "a.smith" {
			t.Fatalf("audit of the drop: %+v", page.Records)
		}
		var list OutboxPage
		f.get("/api/v1/outbox").want(t, http.StatusOK, &list)
		if len(list.Held) != 0 || list.Pending[0].Pending != 1 {
			t.Fatalf("after retry and drop: %+v", list)
		}
	})
	t.Run("an operator holds a pending entry the downstream keeps failing, with a reason; the audit names them", func(t *testing.T) {
		f := newFixture(t, Config{Tokens: namedTokens}, withAlerts)
		f.process(engine.Message{Topic: "alerts/u9", Payload: []byte(`{"unit":"u9","msgId":"c-1"}`)})
		es, err := f.store.Outbox(context.Background(), "", 0, 10)
		if err != nil || len(es) != 1 {
			t.Fatalf("outbox: %d entries, %v", len(es), err)
		}
		path := fmt.Sprintf("/api/v1/outbox/%d/hold", es[0].ID)
		f.post(path, `{"reason":"x"}`, viewer...).want(t, http.StatusForbidden, nil)
		f.post(path, ``, operator...).want(t, http.StatusBadRequest, nil)
		var res forwardResolution
		f.post(path, `{"reason":"dispatch answers 503 to this alert alone"}`, operator...).want(t, http.StatusOK, &res)
		if res.ID != es[0].ID || res.Outcome != engine.OutcomeForwardHeld || res.Operator != "j.doe" ||
			!strings.Contains(res.Reason, "held by an operator while pending: dispatch answers 503 to this alert alone") {
			t.Fatalf("hold: %+v", res)
		}
		var list OutboxPage
		f.get("/api/v1/outbox").want(t, http.StatusOK, &list)
		if len(list.Held) != 1 || list.Held[0].ID != es[0].ID || list.Pending[0].Pending != 0 || list.Pending[0].Oldest != nil {
			t.Fatalf("after the hold: %+v", list)
		}
		r := f.post(path, `{"reason":"again"}`, operator...)
		r.want(t, http.StatusNotFound, nil)
		if !strings.Contains(string(r.body), "no pending outbox entry") {
			t.Fatalf("404 body %s", r.body)
		}
	})
	t.Run("without an outbox the endpoints answer 404", func(t *testing.T) {
		f := newFixture(t, Config{})
		srv := New(Config{Logger: testLogger(t)}, Deps{Engine: f.eng, Audit: f.store, Quarantine: f.store})
		for _, req := range []struct{ method, path string }{{"GET", "/api/v1/outbox"}, {"POST", "/api/v1/outbox/256/retry"}} {
			rec := doHandler(t, srv, req.method, req.path)
			if rec != http.StatusNotFound {
				t.Fatalf("%s %s = %d, want 404", req.method, req.path, rec)
			}
		}
	})
}

// doHandler serves one request with srv's handler and returns the status.
func doHandler(t *testing.T, srv *Server, method, path string) int {
	t.Helper()
	req := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec.Code
}

// Answers of a dispatchHook.
const (
	hookRefuses int32 = iota // 422: the entry is held for an operator
	hookDown                 // 503: the attempt failed, the drainer sends it again
	hookTakes                // 204: delivered
)

// dispatchHook is a downstream webhook whose answer the test sets. It
// counts the copies it took by Idempotency-Key.
type dispatchHook struct {
	answer atomic.Int32
	mu     sync.Mutex
	took   map[string]int
}

func startDispatchHook(t *testing.T, answer int32) (*dispatchHook, string) {
	t.Helper()
	h := &dispatchHook{took: map[string]int{}}
	h.answer.Store(answer)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL + "/dispatch"
}

func (h *dispatchHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	switch h.answer.Load() {
	case hookRefuses:
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"error":"unit u7 is unknown to dispatch"}`)
	case hookDown:
		http.Error(w, "dispatch is restarting", http.StatusServiceUnavailable)
	default:
		h.mu.Lock()
		h.took[r.Header.Get("Idempotency-Key")]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

// copies is how many copies of the entry with key the hook took.
func (h *dispatchHook) copies(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.took[key]
}

// forwardAlertsTo adds a route whose applied messages are forwarded to
// the webhook at url.
func forwardAlertsTo(url string) func(*engine.Options) {
	return func(o *engine.Options) {
		o.Routes = append(o.Routes, engine.Route{Name: "alerts", Topic: "alerts/#", Source: []string{"unit"}, ID: "msgId",
			Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Webhook: url}}}})
	}
}

// webhookDrainer is a drainer's options with a webhook output that backs
// off briefly, bounded at maxEntries. It counts the outbox again every
// 200 ms: a count taken while the engine commits errs high until the next.
func webhookDrainer(t *testing.T, maxEntries int) forward.Options {
	t.Helper()
	wh, err := forward.NewWebhook(forward.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return forward.Options{Outputs: map[string]forward.Output{engine.OutputWebhook: wh}, MaxEntries: maxEntries,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Poll: 200 * time.Millisecond}
}

// refusedAlerts processes an alert for each id, which the refusing
// webhook has the drainer hold, and returns the held entries' ids in order.
func (f *fixture) refusedAlerts(t *testing.T, msgIDs ...string) []uint64 {
	t.Helper()
	msgs := make([]engine.Message, len(msgIDs))
	for i, id := range msgIDs {
		msgs[i] = alert(id)
	}
	f.process(msgs...)
	var held []engine.HeldEntry
	eventually(t, "the alerts are held", func() bool {
		var err error
		held, err = f.store.OutboxHeld(context.Background())
		return err == nil && len(held) == len(msgIDs)
	})
	ids := make([]uint64, len(held))
	for i, h := range held {
		ids[i] = h.ID
	}
	return ids
}

func alert(msgID string) engine.Message {
	return engine.Message{Topic: "alerts/u7", Payload: fmt.Appendf(nil, `{"unit":"u7","msgId":%q}`, msgID)}
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func TestForwardStatusAPI(t *testing.T) {
	t.Run("a process where no route forwards says so", func(t *testing.T) {
		f := newFixture(t, Config{})
		var st ForwardStatus
		f.get("/api/v1/forward").want(t, http.StatusOK, &st)
		if st.Forwarding || st.Outputs == nil || len(st.Outputs) != 0 || st.MaxEntries != 0 {
			t.Fatalf("status without a drainer: %+v", st)
		}
	})
	t.Run("a failing webhook shows with its error until it takes the entry", func(t *testing.T) {
		hook, url := startDispatchHook(t, hookDown)
		f := newForwardingFixture(t, Config{}, webhookDrainer(t, 50), forwardAlertsTo(url))
		key := f.process(alert("a-1"))[0].Key.String()
		var st ForwardStatus
		eventually(t, "the webhook output fails", func() bool {
			f.get("/api/v1/forward").want(t, http.StatusOK, &st)
			return len(st.Outputs) == 1 && st.Outputs[0].Failing && st.Depth == 1
		})
		o := st.Outputs[0]
		if !st.Forwarding || st.Member != "" || st.MaxEntries != 50 || st.Full ||
			o.Output != engine.OutputWebhook || o.Attempts < 1 || o.Failures < 1 || o.Delivered != 0 || o.Since.IsZero() ||
			!strings.Contains(o.LastError, "503 Service Unavailable: dispatch is restarting") {
			t.Fatalf("status while the webhook fails: %+v", st)
		}
		hook.answer.Store(hookTakes)
		eventually(t, "the webhook takes the entry and the output recovers", func() bool {
			st = ForwardStatus{} // omitted fields must not keep the last poll's values
			f.get("/api/v1/forward").want(t, http.StatusOK, &st)
			return st.Depth == 0 && !st.Outputs[0].Failing
		})
		if o := st.Outputs[0]; o.Failing || o.Delivered != 1 || o.LastError != "" || o.Attempts != 0 || hook.copies(key) != 1 {
			t.Fatalf("status after the delivery: %+v; the hook took %d copies", st, hook.copies(key))
		}
	})
}

func TestHeldItemHidesTheWebhooksPassword(t *testing.T) {
	h := NewHeldItem(engine.HeldEntry{OutboxEntry: engine.OutboxEntry{Output: engine.OutputWebhook,
		Target: "https://dispatch:s3cret@dispatch.example/hook"}})
	if h.Target != "https://xxxxx@dispatch.example/hook" {
		t.Fatalf("target: %s", h.Target)
	}
}
