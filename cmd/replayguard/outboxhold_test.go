package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAnOperatorHoldsThePendingEntryADownstreamKeepsFailing: dispatch
// answers 503 to the update of source e3 for ever and takes the others.
// Ingest leaves it pending with the update behind it; `outbox list` names
// it as the oldest pending entry; `outbox hold` (audited, with the
// operator and the reason) sets it aside, and the next drain delivers the
// update behind it; retry and drop then work on it as on any held entry.
func TestAnOperatorHoldsThePendingEntryADownstreamKeepsFailing(t *testing.T) {
	var mu sync.Mutex
	var took []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"source_id":"e3"`) {
			http.Error(w, "dispatch is busy", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		took = append(took, r.Header.Get("Replayguard-Source")+" "+r.Header.Get("Replayguard-Sequence"))
		mu.Unlock()
	}))
	defer hook.Close()
	delivered := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(took, ", ")
	}
	cfg := forwardConfig(t, "tcp://127.0.0.1:1883", "off", fmt.Sprintf("{webhook: %q}", hook.URL), "outputs: {webhook: {max_backoff: 100ms}}\n")
	var feed strings.Builder
	for _, m := range []struct {
		src string
		seq int64
	}{{"e1", 1}, {"e3", 1}, {"e1", 2}} {
		fmt.Fprintf(&feed, `{"topic":"incidents/fd/%s","payload":%s}`+"\n", m.src, incidentPayload(m.src, m.seq))
	}
	_, errs, code := cli(t, feed.String(), "ingest", "--drain-timeout", "500ms", "-c", cfg, "-")
	if code != 0 || delivered() != `["fd","e1"] 1` {
		t.Fatalf("ingest: exit %d, delivered %q\n%s", code, delivered(), errs)
	}
	_, errs = heldList(t, cfg)
	m := regexp.MustCompile(`outbox: oldest pending entry (\d+) \(webhook ` + regexp.QuoteMeta(hook.URL) + `\), decided \d+s ago\n`).FindStringSubmatch(errs)
	if m == nil || !strings.Contains(errs, "outbox: 2 pending, 0 held for an operator") {
		t.Fatalf("outbox list does not name the oldest pending entry:\n%s", errs)
	}
	id := m[1]

	if _, errs, code := cli(t, "", "outbox", "hold", id, "-c", cfg); code != exitUsage || !strings.Contains(errs, "hold needs --reason TEXT") {
		t.Fatalf("outbox hold without a reason: exit %d\n%s", code, errs)
	}
	out := mustRun(t, "", "outbox", "hold", id, "--reason", "dispatch answers 503 to this update alone", "--operator", "duty officer", "-c", cfg)
	if !strings.Contains(out, "outbox entry "+id+" (webhook "+hook.URL+") is held: the entries behind it go on") {
		t.Fatalf("outbox hold said %q", out)
	}
	if _, errs, code := cli(t, "", "outbox", "hold", id, "--reason", "again", "-c", cfg); code != 1 || !strings.Contains(errs, "no pending outbox entry "+id) {
		t.Fatalf("a second hold: exit %d\n%s", code, errs)
	}
	hs, errs := heldList(t, cfg)
	if len(hs) != 1 || fmt.Sprint(hs[0].ID) != id || !strings.Contains(hs[0].Reason, "held by an operator while pending: dispatch answers 503 to this update alone") ||
		!strings.Contains(errs, "outbox: 1 pending, 1 held for an operator") {
		t.Fatalf("after the hold: %+v\n%s", hs, errs)
	}
	held := forwardAudit(t, cfg)["forward_held"]
	if len(held) != 1 || fmt.Sprint(held[0]["ref"]) != id || held[0]["operator"] != "duty officer" {
		t.Fatalf("audit of the hold: %v", held)
	}

	if _, errs, code := cli(t, "", "ingest", "--drain-timeout", "5s", "-c", cfg, "-"); code != 0 || delivered() != `["fd","e1"] 1, ["fd","e1"] 2` {
		t.Fatalf("the next drain: exit %d, delivered %q\n%s", code, delivered(), errs)
	}
	mustRun(t, "", "outbox", "drop", id, "--reason", "entered in dispatch by hand", "-c", cfg)
	if hs, errs := heldList(t, cfg); len(hs) != 0 || !strings.Contains(errs, "outbox: 0 pending, 0 held for an operator") {
		t.Fatalf("after the drop: %+v\n%s", hs, errs)
	}
}

// TestOutboxHoldOnASharedStoreDefaultsToTheMemberRunWritesAs: on a shared
// store with store.member unset, run writes as mqtt.client_id, and that is
// whose outbox `outbox hold` without --member looks in, not a member of
// the command's own, which keeps no outbox.
func TestOutboxHoldOnASharedStoreDefaultsToTheMemberRunWritesAs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis")
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "dispatch is busy", http.StatusServiceUnavailable)
	}))
	defer hook.Close()
	cfg := forwardConfig(t, "tcp://127.0.0.1:1883", "off", fmt.Sprintf("{webhook: %q}", hook.URL), "outputs: {webhook: {max_backoff: 100ms}}\n")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	member := regexp.MustCompile(`client_id: (\S+),`).FindStringSubmatch(string(b))[1]
	store := fmt.Sprintf(`store: {kind: redis, url: %q, prefix: "{hold}:"`, testbroker.StartRedis(t, testbroker.RedisOptions{}).URL())
	text := regexp.MustCompile(`(?m)^store:.*$`).ReplaceAllLiteralString(string(b), store+"}")
	asRun := filepath.Join(filepath.Dir(cfg), "as-run.yaml") // decides as run would, under mqtt.client_id
	if err := os.WriteFile(asRun, []byte(regexp.MustCompile(`(?m)^store:.*$`).ReplaceAllLiteralString(string(b), store+", member: "+member+"}")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	feed := fmt.Sprintf(`{"topic":"incidents/fd/e3","payload":%s}`+"\n", incidentPayload("e3", 1))
	if _, errs, code := cli(t, feed, "ingest", "--drain-timeout", "300ms", "-c", asRun, "-"); code != 0 {
		t.Fatalf("ingest: exit %d\n%s", code, errs)
	}
	_, errs := heldList(t, cfg)
	m := regexp.MustCompile(`outbox of member ` + regexp.QuoteMeta(member) + `: 1 pending, oldest pending entry (\d+) `).FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no entry pending in the outbox of %s:\n%s", member, errs)
	}
	out, errs, code := cli(t, "", "outbox", "hold", m[1], "--reason", "dispatch answers 503 to this update alone", "-c", cfg)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("outbox entry %s of member %s (webhook %s) is held", m[1], member, hook.URL)) {
		t.Fatalf("outbox hold %s without --member: exit %d\n%s%s", m[1], code, out, errs)
	}
}
