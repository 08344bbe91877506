package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/web"
)

// dispatchHook is a webhook that refuses the updates of source e3 with
// 422 while refusing is set, and counts what it takes by Idempotency-Key.
type dispatchHook struct {
	*httptest.Server
	refusing atomic.Bool
	mu       sync.Mutex
	got      map[string]int
}

func newDispatchHook(t *testing.T) *dispatchHook {
	h := &dispatchHook{got: map[string]int{}}
	h.refusing.Store(true)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if h.refusing.Load() && strings.Contains(string(body), `"source_id":"e3"`) {
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"error":"unit E3 is unknown to dispatch"}`)
			return
		}
		h.mu.Lock()
		h.got[r.Header.Get("Idempotency-Key")]++
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *dispatchHook) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[key]
}

func (h *dispatchHook) keys() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

// outboxConfig is forwardConfig with a webhook forward, a store section
// (a flow mapping; "" keeps the embedded one) and an operator's token.
func outboxConfig(t *testing.T, broker, listen, hook, store string) string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "operator")
	os.WriteFile(tokenFile, []byte("0perator-token\n"), 0o600)
	cfg := forwardConfig(t, broker, listen, fmt.Sprintf("{webhook: %q}", hook), "")
	b, _ := os.ReadFile(cfg)
	text := strings.Replace(string(b), fmt.Sprintf("http: {listen: %s}", listen), fmt.Sprintf(`http:
  listen: %s
  tokens:
    - {name: j.doe, token_file: %s, role: operator}`, listen, tokenFile), 1)
	if store != "" {
		store = withJournal(store, filepath.Join(filepath.Dir(cfg), "journal"))
		text = regexp.MustCompile(`(?m)^store:.*$`).ReplaceAllLiteralString(text, "store: "+store)
	}
	os.WriteFile(cfg, []byte(text), 0o644)
	return cfg
}

// heldList runs `outbox list`: the held entries and what stderr says.
func heldList(t *testing.T, cfg string) ([]web.HeldItem, string) {
	t.Helper()
	out, errs, code := cli(t, "", "outbox", "list", "-c", cfg)
	if code != 0 {
		t.Fatalf("outbox list: exit %d\n%s", code, errs)
	}
	var hs []web.HeldItem
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var h web.HeldItem
		if err := json.Unmarshal([]byte(line), &h); err != nil {
			t.Fatalf("outbox list line %q: %v", line, err)
		}
		hs = append(hs, h)
	}
	return hs, errs
}

// waitHeld waits until `outbox list` shows n held entries and returns them.
func waitHeld(t *testing.T, cfg string, n int) []web.HeldItem {
	t.Helper()
	var hs []web.HeldItem
	waitUntil(t, fmt.Sprintf("outbox list shows %d held", n), func() bool {
		hs, _ = heldList(t, cfg)
		return len(hs) == n
	})
	return hs
}

// forwardAudit returns the audit records about outbox entries, by outcome.
func forwardAudit(t *testing.T, cfg string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(mustRun(t, "", "audit", "export", "-c", cfg)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if o, _ := r["outcome"].(string); strings.HasPrefix(o, "forward_") {
			out[o] = append(out[o], r)
		}
	}
	return out
}

// publishSources publishes sequences 1..n of sources e1, e2 and e3.
func publishSources(t *testing.T, broker string, n int) {
	t.Helper()
	pub := testbroker.NewPublisher(t, []string{broker}, testbroker.PublisherOptions{
		Topic: func(src string) string { return "incidents/fd/" + src }, Payload: incidentPayload})
	for _, src := range []string{"e1", "e2", "e3"} {
		if got := pub.Publish(context.Background(), src, n); got != n {
			t.Fatalf("%d of %d publishes of %s acknowledged", got, n, src)
		}
	}
}

// checkHeld checks a listed entry: the webhook's answer, the payload.
func checkHeld(t *testing.T, h web.HeldItem, hook string) {
	t.Helper()
	if h.Output != "webhook" || h.Target != hook || h.Route != "incidents" || h.Topic != "incidents/fd/e3" || len(h.Key) != 64 ||
		!strings.Contains(h.Reason, "422") || !strings.Contains(h.Reason, "unit E3 is unknown to dispatch") ||
		!strings.Contains(string(h.Payload), `"source_id":"e3"`) || h.PayloadB64 == "" || h.Time.IsZero() {
		t.Fatalf("held entry: %+v", h)
	}
}

// TestOutboxThroughARunningDaemon: the webhook refuses an entry with 422
// while run holds the embedded store; `outbox list`, `retry` and `drop`
// go through its API; the retried entry is delivered once; a drop is
// audited under the token's name. An entry retried on the local store
// while run is stopped is delivered by the next run. audit verify passes.
func TestOutboxThroughARunningDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	bin := buildBinary(t)
	hook := newDispatchHook(t)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	cfg := outboxConfig(t, broker.URL(), listen, hook.URL, "")
	t.Setenv(EnvToken, "0perator-token")
	daemon, exited := startRun(t, bin, cfg, listen)

	publishSources(t, broker.URL(), 2)
	hs := waitHeld(t, cfg, 2)
	waitUntil(t, "e1 and e2 are delivered", func() bool { return hook.keys() == 4 })
	checkHeld(t, hs[0], hook.URL)
	// The hook counts a POST when it reads it, before its answer reaches
	// the output, which then marks the entry delivered.
	waitUntil(t, "the delivered entries leave the outbox", func() bool { _, errs := heldList(t, cfg); return strings.HasPrefix(errs, "outbox: 0 pending") })
	if _, errs := heldList(t, cfg); errs != "outbox: 0 pending, 2 held for an operator\n" {
		t.Fatalf("outbox list through the API says on stderr:\n%s", errs)
	}
	if _, errs, code := cli(t, "", "outbox", "drop", fmt.Sprint(hs[1].ID), "-c", cfg); code != 2 || !strings.Contains(errs, "drop needs --reason") {
		t.Fatalf("a drop without a reason: exit %d\n%s", code, errs)
	}
	if _, errs, code := cli(t, "", "outbox", "retry", fmt.Sprint(hs[0].ID), "--operator", "x", "-c", cfg); code != 2 || !strings.Contains(errs, "--operator is not taken with an API token") {
		t.Fatalf("--operator through the API: exit %d\n%s", code, errs)
	}

	hook.refusing.Store(false)
	// Several ids: one not held is named, the other retried.
	out, errs, code := cli(t, "", "outbox", "retry", "999", fmt.Sprint(hs[0].ID), "-c", cfg)
	if code != 1 || !strings.Contains(out, fmt.Sprintf("outbox entry %d (webhook %s) is pending again", hs[0].ID, hook.URL)) ||
		!strings.Contains(errs, "no held outbox entry 999") || !strings.Contains(errs, "1 of 2 entries not retried") {
		t.Fatalf("outbox retry of two, one not held: exit %d\n%s\n%s", code, out, errs)
	}
	waitUntil(t, "the retried entry is delivered", func() bool { return hook.count(hs[0].Key) == 1 })
	if _, errs, code := cli(t, "", "outbox", "retry", fmt.Sprint(hs[0].ID), "-c", cfg); code != 1 || !strings.Contains(errs, fmt.Sprintf("no held outbox entry %d", hs[0].ID)) {
		t.Fatalf("a second retry: exit %d\n%s", code, errs)
	}
	out = mustRun(t, "", "outbox", "drop", fmt.Sprint(hs[1].ID), "--reason", "entered in dispatch by hand", "-c", cfg)
	if !strings.Contains(out, fmt.Sprintf("outbox entry %d (webhook %s) dropped", hs[1].ID, hook.URL)) {
		t.Fatalf("outbox drop: %q", out)
	}
	if hs, _ := heldList(t, cfg); len(hs) != 0 {
		t.Fatalf("held after retry and drop: %+v", hs)
	}

	// Refused again, then run stops: the retry on the local store is
	// delivered by the next run.
	hook.refusing.Store(true)
	pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{
		Topic: func(src string) string { return "incidents/fd/" + src }, Payload: func(src string, seq int64) []byte { return incidentPayload(src, seq+10) }})
	if pub.Publish(context.Background(), "e3", 1) != 1 {
		t.Fatal("publish")
	}
	late := waitHeld(t, cfg, 1)[0]
	stopRun(t, daemon, exited)
	hook.refusing.Store(false)
	out = mustRun(t, "", "outbox", "retry", fmt.Sprint(late.ID), "--operator", "duty officer", "--reason", "dispatch fixed", "-c", cfg)
	if !strings.Contains(out, "is pending again") {
		t.Fatalf("outbox retry on the local store: %q", out)
	}
	if _, errs := heldList(t, cfg); !regexp.MustCompile(fmt.Sprintf(`^outbox: oldest pending entry %d \(webhook %s\), decided \d+s ago\noutbox: 1 pending, 0 held for an operator\n$`,
		late.ID, regexp.QuoteMeta(hook.URL))).MatchString(errs) {
		t.Fatalf("outbox list on the local store says on stderr:\n%s", errs)
	}
	if hook.count(late.Key) != 0 {
		t.Fatal("delivered before run started")
	}
	daemon, exited = startRun(t, bin, cfg, listen)
	waitUntil(t, "the next run delivers the retried entry", func() bool { return hook.count(late.Key) == 1 })
	stopRun(t, daemon, exited)

	for i, h := range []web.HeldItem{hs[0], hs[1], late} {
		if n, want := hook.count(h.Key), map[int]int{0: 1, 1: 0, 2: 1}[i]; n != want {
			t.Fatalf("entry %d delivered %d times, want %d", h.ID, n, want)
		}
	}
	if hook.keys() != 6 {
		t.Fatalf("%d keys delivered, want 6 (the 6 published but the dropped one, and the late one)", hook.keys())
	}
	recs := forwardAudit(t, cfg)
	if len(recs["forward_held"]) != 3 || len(recs["forward_retried"]) != 2 || len(recs["forward_dropped"]) != 1 {
		t.Fatalf("forward audit records: %v", recs)
	}
	d := recs["forward_dropped"][0]
	if d["operator"] != "j.doe" || d["reason"] != "entered in dispatch by hand" || d["ref"] != float64(hs[1].ID) || d["key"] != hs[1].Key {
		t.Fatalf("the drop's record: %v", d)
	}
	if r := recs["forward_retried"]; r[0]["operator"] != "j.doe" || r[1]["operator"] != "duty officer" || r[1]["reason"] != "dispatch fixed" {
		t.Fatalf("the retries' records: %v", r)
	}
	mustRun(t, "", "audit", "verify", "-c", cfg)
}

// TestOutboxOnASharedStore: run drains the group's outbox on PostgreSQL
// and on Redis; the commands open the shared store themselves (no API):
// `outbox list` shows the refused entry with the webhook's answer, `retry`
// after the webhook is fixed has the running member deliver it once, and
// `drop --reason` removes one with an audit record naming the operator;
// an entry retried while no member runs waits, pending.
func TestOutboxOnASharedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto, PostgreSQL, Redis and the daemon")
	}
	bin := buildBinary(t)
	for _, kind := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"on PostgreSQL", func(t *testing.T) string {
			return fmt.Sprintf("{kind: postgres, url: %q, schema: outbox}", testbroker.StartPostgres(t, testbroker.PostgresOptions{}).URL())
		}},
		{"on Redis", func(t *testing.T) string {
			return fmt.Sprintf(`{kind: redis, url: %q, prefix: "{outbox}:"}`, testbroker.StartRedis(t, testbroker.RedisOptions{}).URL())
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			hook := newDispatchHook(t)
			broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
			listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
			cfg := outboxConfig(t, broker.URL(), listen, hook.URL, kind.store(t))
			daemon, exited := startRun(t, bin, cfg, listen)

			publishSources(t, broker.URL(), 2)
			hs := waitHeld(t, cfg, 2)
			waitUntil(t, "e1 and e2 are delivered", func() bool { return hook.keys() == 4 })
			checkHeld(t, hs[0], hook.URL)
			member := hs[0].Member
			if member == "" || hs[1].Member != member {
				t.Fatalf("held entries name members %q and %q, want the running member's", member, hs[1].Member)
			}
			waitUntil(t, "the delivered entries leave the outbox", func() bool { _, errs := heldList(t, cfg); return strings.HasPrefix(errs, "outbox: 0 pending") })
			if _, errs := heldList(t, cfg); errs != "outbox: 0 pending, 2 held for an operator\n" {
				t.Fatalf("outbox list says on stderr:\n%s", errs)
			}

			hook.refusing.Store(false)
			out := mustRun(t, "", "outbox", "retry", fmt.Sprint(hs[0].ID), "--operator", "duty officer", "-c", cfg)
			if !strings.Contains(out, fmt.Sprintf("outbox entry %d of member %s (webhook %s) is pending again", hs[0].ID, member, hook.URL)) {
				t.Fatalf("outbox retry: %q", out)
			}
			waitUntil(t, "the running member delivers the retried entry", func() bool { return hook.count(hs[0].Key) == 1 })
			mustRun(t, "", "outbox", "drop", fmt.Sprint(hs[1].ID), "--member", member, "--reason", "entered by hand", "--operator", "shift lead", "-c", cfg)
			if _, errs, code := cli(t, "", "outbox", "drop", fmt.Sprint(hs[1].ID), "--reason", "again", "-c", cfg); code != 1 ||
				!strings.Contains(errs, fmt.Sprintf("no held outbox entry %d", hs[1].ID)) {
				t.Fatalf("a second drop: exit %d\n%s", code, errs)
			}
			if hs, _ := heldList(t, cfg); len(hs) != 0 {
				t.Fatalf("held after retry and drop: %+v", hs)
			}
			// One more refused, retried while no member runs: it waits,
			// pending in its member's outbox.
			hook.refusing.Store(true)
			pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{
				Topic: func(src string) string { return "incidents/fd/" + src }, Payload: func(src string, seq int64) []byte { return incidentPayload(src, seq+10) }})
			if pub.Publish(context.Background(), "e3", 1) != 1 {
				t.Fatal("publish")
			}
			late := waitHeld(t, cfg, 1)[0]
			stopRun(t, daemon, exited)
			mustRun(t, "", "outbox", "retry", fmt.Sprint(late.ID), "--operator", "duty officer", "-c", cfg)
			if _, errs := heldList(t, cfg); !regexp.MustCompile(fmt.Sprintf(`^outbox of member %s: 1 pending, oldest pending entry %d \(webhook %s\), decided \d+s ago\noutbox: 1 pending, 0 held for an operator\n$`,
				regexp.QuoteMeta(member), late.ID, regexp.QuoteMeta(hook.URL))).MatchString(errs) {
				t.Fatalf("outbox list with an entry pending says on stderr:\n%s", errs)
			}
			if hook.count(hs[0].Key) != 1 || hook.count(hs[1].Key) != 0 || hook.keys() != 5 {
				t.Fatalf("deliveries: retried %d, dropped %d, %d keys; want 1, 0, 5", hook.count(hs[0].Key), hook.count(hs[1].Key), hook.keys())
			}
			recs := forwardAudit(t, cfg)
			if len(recs["forward_held"]) != 3 || len(recs["forward_retried"]) != 2 || len(recs["forward_dropped"]) != 1 {
				t.Fatalf("forward audit records: %v", recs)
			}
			if d := recs["forward_dropped"][0]; d["operator"] != "shift lead" || d["reason"] != "outbox of member "+member+": entered by hand" {
				t.Fatalf("the drop's record: %v", d)
			}
			if r := recs["forward_retried"][0]; r["operator"] != "duty officer" || r["ref"] != float64(hs[0].ID) {
				t.Fatalf("the retry's record: %v", r)
			}
			mustRun(t, "", "audit", "verify", "-c", cfg)
		})
	}
}
