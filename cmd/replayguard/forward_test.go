package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/web"
)

// forwardConfig writes a configuration whose incident route projects the
// casualties and forwards each applied message with effect (a flow
// mapping), consuming from broker and serving the API on listen.
func forwardConfig(t *testing.T, broker, listen, effect, extra string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`store: {kind: embedded, path: %s}
window: {ttl: 2h, max_entries: 1000000, sequence_span: 4096}
routes:
  - name: incidents
    topic: incidents/#
    source: [agency, source_id]
    sequence: sequence
    epoch: boot_id
    effects:
      - entity: "incident/{incident_id}"
        add: {casualties: casualty_delta}
      - forward: %s
mqtt: {brokers: [%s], client_id: %s, session_expiry: 1h}
http: {listen: %s}
%s`, filepath.Join(dir, "data"), effect, broker, testbroker.UniqueClientID("rg-fwd"), listen, extra)
	path := filepath.Join(dir, "replayguard.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// boundedOutboxConfig is forwardConfig forwarding to the webhook at hook,
// with outbox.max_entries and mqtt.batch_size set and a short backoff.
func boundedOutboxConfig(t *testing.T, broker, listen, hook string, maxEntries, batch int) string {
	t.Helper()
	cfg := forwardConfig(t, broker, listen, fmt.Sprintf("{webhook: %q}", hook),
		fmt.Sprintf("outbox: {max_entries: %d}\noutputs: {webhook: {max_backoff: 200ms}}\n", maxEntries))
	b, _ := os.ReadFile(cfg)
	withBatch := strings.Replace(string(b), "session_expiry: 1h}", fmt.Sprintf("session_expiry: 1h, batch_size: %d}", batch), 1)
	if withBatch == string(b) {
		t.Fatal("the configuration has no mqtt section to give a batch size")
	}
	if err := os.WriteFile(cfg, []byte(withBatch), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func incidentPayload(src string, seq int64) []byte {
	return fmt.Appendf(nil, `{"agency":"fd","source_id":%q,"boot_id":1,"sequence":%d,"incident_id":"I1","casualty_delta":1}`, src, seq)
}

// hookServer is a webhook that records what it accepts, by Idempotency-Key,
// and answers 503 while down.
type hookServer struct {
	*httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	keys []string
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if h.down.Load() {
			http.Error(w, "dispatch is down", http.StatusServiceUnavailable)
			return
		}
		h.mu.Lock()
		h.keys = append(h.keys, r.Header.Get("Idempotency-Key"))
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) distinct() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for _, k := range h.keys {
		seen[k] = true
	}
	return len(seen)
}

func TestIngestForwardsAndSaysWhatIsLeftForRun(t *testing.T) {
	hook := newHookServer(t)
	cfg := forwardConfig(t, "tcp://127.0.0.1:1883", "off", fmt.Sprintf("{webhook: %q}", hook.URL), "")
	var feed strings.Builder
	for seq := 1; seq <= 20; seq++ {
		fmt.Fprintf(&feed, `{"topic":"incidents/fd/e1","payload":%s}`+"\n", incidentPayload("e1", int64(seq)))
	}
	fmt.Fprintf(&feed, `{"topic":"incidents/fd/e1","payload":%s}`+"\n", incidentPayload("e1", 3)) // a replay
	out, errs, code := cli(t, feed.String(), "ingest", "-c", cfg, "-")
	if code != 0 || !strings.Contains(out, "applied=20 ") || !strings.Contains(errs, "forward: 20 entries delivered downstream\n") {
		t.Logf("hook got %d", hook.distinct())
		t.Fatalf("ingest: exit %d\n%s\n%s", code, out, errs)
	}
	if hook.distinct() != 20 {
		t.Fatalf("the webhook received %d distinct keys, want 20", hook.distinct())
	}

	hook.down.Store(true)
	feed.Reset()
	for seq := 21; seq <= 25; seq++ {
		fmt.Fprintf(&feed, `{"topic":"incidents/fd/e1","payload":%s}`+"\n", incidentPayload("e1", int64(seq)))
	}
	_, errs, code = cli(t, feed.String(), "ingest", "--drain-timeout", "500ms", "-c", cfg, "-")
	if code != 0 || !strings.Contains(errs, "forward: 0 entries delivered downstream; 5 still pending in the outbox for `replayguard run` to deliver (webhook output failing") ||
		!strings.Contains(errs, "503 Service Unavailable") {
		t.Fatalf("ingest with the webhook down: exit %d\n%s", code, errs)
	}
	hook.down.Store(false)
	_, errs, code = cli(t, "", "ingest", "-c", cfg, "-")
	if code != 0 || !strings.Contains(errs, "forward: 5 entries delivered downstream\n") || hook.distinct() != 25 {
		t.Fatalf("the next ingest delivers what was left: exit %d, %d keys\n%s", code, hook.distinct(), errs)
	}
}

// TestIngestOnTheMemoryStoreSaysWhatItCouldNotForwardIsLost: the memory
// store ends with ingest, so what the downstream did not take by the end
// is lost, not left for a run: ingest says so and fails.
func TestIngestOnTheMemoryStoreSaysWhatItCouldNotForwardIsLost(t *testing.T) {
	hook := newHookServer(t)
	hook.down.Store(true)
	cfg := forwardConfig(t, "tcp://127.0.0.1:1883", "off", fmt.Sprintf("{webhook: %q}", hook.URL), "")
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	memory := regexp.MustCompile(`store: \{kind: embedded, path: [^}]*\}`).ReplaceAll(text, []byte("store: {kind: memory}"))
	if err := os.WriteFile(cfg, memory, 0o644); err != nil {
		t.Fatal(err)
	}
	var feed strings.Builder
	for seq := 1; seq <= 3; seq++ {
		fmt.Fprintf(&feed, `{"topic":"incidents/fd/e1","payload":%s}`+"\n", incidentPayload("e1", int64(seq)))
	}
	out, errs, code := cli(t, feed.String(), "ingest", "--drain-timeout", "300ms", "-c", cfg, "-")
	if code != 1 || !strings.Contains(out, "applied=3 ") ||
		!strings.Contains(errs, "forward: 0 entries delivered downstream; 3 not delivered, lost with the memory store (webhook output failing") ||
		!strings.Contains(errs, "3 entries not delivered within --drain-timeout 300ms are lost: the memory store keeps no outbox after ingest") ||
		strings.Contains(errs, "for `replayguard run` to deliver") {
		t.Fatalf("ingest on the memory store with the webhook down: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestRunStopsAcknowledgingWhileTheOutboxIsFullAndResumes: with the
// webhook down the outbox fills to outbox.max_entries, the consumer stops
// committing (so nothing past it is acknowledged upstream) and /readyz
// says why; with the webhook back it drains, resumes by itself, and every
// message is applied and delivered, none lost.
func TestRunStopsAcknowledgingWhileTheOutboxIsFullAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	bin := buildBinary(t)
	hook := newHookServer(t)
	hook.down.Store(true)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	const maxEntries, batch, n = 40, 8, 300
	cfg := boundedOutboxConfig(t, broker.URL(), listen, hook.URL, maxEntries, batch)
	daemon, exited := startRun(t, bin, cfg, listen)

	pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{
		Topic: func(src string) string { return "incidents/fd/" + src }, Payload: incidentPayload, Window: 32})
	if got := pub.Publish(context.Background(), "e1", n); got != n {
		t.Fatalf("%d of %d publishes acknowledged", got, n)
	}
	waitUntil(t, "readiness says the outbox is full", func() bool {
		code, body := get(t, "http://"+listen+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "outbox full") && strings.Contains(body, "webhook output failing")
	})
	// Full counts the batch decided and not yet committed: once it has
	// committed, the outbox itself holds the bound.
	var fs web.ForwardStatus // what the dashboard's outbox panel shows
	var code int
	var body string
	waitUntil(t, "the batch decided at the bound is committed", func() bool {
		code, body = get(t, "http://"+listen+"/api/v1/forward")
		fs = web.ForwardStatus{}
		return code == http.StatusOK && json.Unmarshal([]byte(body), &fs) == nil && fs.Depth >= maxEntries
	})
	if !fs.Forwarding || !fs.Full || fs.FullSince.IsZero() || fs.MaxEntries != maxEntries ||
		len(fs.Outputs) != 1 || fs.Outputs[0].Output != "webhook" || !fs.Outputs[0].Failing || fs.Outputs[0].LastError == "" {
		t.Fatalf("/api/v1/forward while full: %d %s", code, body)
	}
	time.Sleep(500 * time.Millisecond) // whatever the consumer still did
	decided, acked := metricSum(t, listen, "replayguard_decisions_total"), metricSum(t, listen, "replayguard_acked_total")
	if decided < maxEntries || decided > maxEntries+batch || acked > decided || metricSum(t, listen, "replayguard_outbox_entries") < maxEntries {
		t.Fatalf("while full: %v decided, %v acknowledged, outbox %v; want between %d and %d", decided, acked,
			metricSum(t, listen, "replayguard_outbox_entries"), maxEntries, maxEntries+batch)
	}

	hook.down.Store(false)
	waitUntil(t, "every message is delivered", func() bool { return hook.distinct() == n })
	waitUntil(t, "ready again", func() bool { code, _ := get(t, "http://"+listen+"/readyz"); return code == http.StatusOK })
	if d, a := metricSum(t, listen, "replayguard_decisions_total"), metricSum(t, listen, "replayguard_acked_total"); d != n || a != n {
		t.Fatalf("after the drain: %v decided, %v acknowledged, want %d", d, a, n)
	}
	stopRun(t, daemon, exited)
	if got := mustRun(t, "", "state", "--json", "-c", cfg); !strings.Contains(got, fmt.Sprintf(`"casualties": %d`, n)) {
		t.Fatalf("state: %s", got)
	}
}

// TestRedundantFeedsStopAtTheOutboxBoundAndForwardEachMessageOnce: with
// two broker paths (mqtt.feeds), each feed's consumer decides its next
// batch while one commits; with the webhook down the outbox still stops at
// outbox.max_entries plus a batch a path, and once the webhook is back
// every message reaches it once, whichever path delivered it first.
func TestRedundantFeedsStopAtTheOutboxBoundAndForwardEachMessageOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two mosquittos and the daemon")
	}
	bin := buildBinary(t)
	hook := newHookServer(t)
	hook.down.Store(true)
	a := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	const maxEntries, batch, n = 40, 8, 300
	cfg := boundedOutboxConfig(t, a.URL(), listen, hook.URL, maxEntries, batch)
	text, _ := os.ReadFile(cfg)
	feeds := strings.Replace(string(text), "brokers: ["+a.URL()+"]",
		fmt.Sprintf("feeds: [{name: a, brokers: [%s]}, {name: b, brokers: [%s]}]", a.URL(), b.URL()), 1)
	if feeds == string(text) {
		t.Fatal("the configuration has no broker list to replace")
	}
	os.WriteFile(cfg, []byte(feeds), 0o644)
	daemon, exited := startRun(t, bin, cfg, listen)
	waitUntil(t, "both feeds are up", func() bool {
		code, body := get(t, "http://"+listen+"/readyz")
		return code == http.StatusOK && !strings.Contains(body, "warning")
	})

	for _, br := range []*testbroker.Mosquitto{a, b} { // every message on both paths
		pub := testbroker.NewPublisher(t, []string{br.URL()}, testbroker.PublisherOptions{
			Topic: func(src string) string { return "incidents/fd/" + src }, Payload: incidentPayload, Window: 32})
		if got := pub.Publish(context.Background(), "e1", n); got != n {
			t.Fatalf("%s: %d of %d publishes acknowledged", br.URL(), got, n)
		}
	}
	waitUntil(t, "readiness says the outbox is full", func() bool {
		code, body := get(t, "http://"+listen+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "outbox full")
	})
	time.Sleep(500 * time.Millisecond) // whatever the consumers still did
	if pending := metricSum(t, listen, "replayguard_outbox_entries"); pending < maxEntries || pending > maxEntries+2*batch {
		t.Fatalf("while full: %v entries in the outbox, want between %d and %d", pending, maxEntries, maxEntries+2*batch)
	}

	hook.down.Store(false)
	waitUntil(t, "every message is delivered", func() bool { return hook.distinct() == n })
	waitUntil(t, "ready again", func() bool {
		code, body := get(t, "http://"+listen+"/readyz")
		return code == http.StatusOK && !strings.Contains(body, "warning")
	})
	waitUntil(t, "both copies of every message decided and acknowledged", func() bool {
		return metricSum(t, listen, "replayguard_decisions_total") == 2*n && metricSum(t, listen, "replayguard_acked_total") == 2*n
	})
	stopRun(t, daemon, exited)
	hook.mu.Lock()
	posts := len(hook.keys)
	hook.mu.Unlock()
	if posts != n {
		t.Fatalf("the webhook took %d posts for %d messages", posts, n)
	}
	if got := mustRun(t, "", "state", "--json", "-c", cfg); !strings.Contains(got, fmt.Sprintf(`"casualties": %d`, n)) {
		t.Fatalf("state: %s", got)
	}
}

// TestRunKilledWhileForwardingDeliversEveryAppliedEventOnce kills run with
// SIGKILL several times while it forwards a replay-heavy feed to the
// broker it consumes from: the downstream subscriber receives every
// applied event at least once under a stable key, exactly once keying on
// it, in commit order per source, and nothing that was not applied.
func TestRunKilledWhileForwardingDeliversEveryAppliedEventOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mosquitto and the daemon")
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	bin := buildBinary(t)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	sub := testbroker.NewSubscriber(t, []string{broker.URL()}, "clean/#")
	listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
	cfg := forwardConfig(t, broker.URL(), listen, `{topic: "clean/{topic}"}`, "")
	daemon, _ := startRun(t, bin, cfg, listen)

	pub := testbroker.NewPublisher(t, []string{broker.URL()}, testbroker.PublisherOptions{
		Topic: func(src string) string { return "incidents/fd/" + src }, Payload: incidentPayload, Window: 16})
	const sources, rounds, perRound = 4, 4, 400
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		for s := 0; s < sources; s++ {
			wg.Go(func() { pub.Publish(context.Background(), fmt.Sprintf("e%d", s), perRound/sources) })
		}
		wg.Wait()
		all := pub.All()
		pub.Republish(context.Background(), all[len(all)-rng.IntN(len(all)):]) // a replay burst
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		daemon.Process.Signal(syscall.SIGKILL)
		daemon.Wait()
		daemon, _ = startRun(t, bin, cfg, listen)
	}
	total := rounds * perRound
	waitUntil(t, "every message reaches the subscriber", func() bool { return len(firstCopies(sub.Messages())) >= total })
	daemon.Process.Signal(syscall.SIGTERM)
	daemon.Wait()

	applied := map[string]string{} // key → source
	var order []string             // applied keys in commit order
	for _, rec := range auditRecords(t, cfg) {
		if rec.Outcome == "applied" || rec.Outcome == "applied_late" {
			applied[rec.Key] = rec.Source[1]
			order = append(order, rec.Key)
		}
	}
	if len(applied) != total {
		t.Fatalf("%d applied, want %d (every published message once)", len(applied), total)
	}
	got := sub.Messages()
	firsts := firstCopies(got)
	if len(firsts) != total {
		t.Fatalf("%d distinct keys received, want %d", len(firsts), total)
	}
	bySource := map[string][]string{}
	for _, m := range got {
		if _, ok := applied[m.User["replayguard-key"]]; !ok {
			t.Fatalf("received %s with key %q, which no applied decision has", m.Topic, m.User["replayguard-key"])
		}
	}
	for _, m := range firsts {
		src := applied[m.User["replayguard-key"]]
		bySource[src] = append(bySource[src], m.User["replayguard-key"])
	}
	want := map[string][]string{}
	for _, k := range order {
		want[applied[k]] = append(want[applied[k]], k)
	}
	for src, keys := range want {
		if !slices.Equal(bySource[src], keys) {
			t.Fatalf("source %s: first copies arrived out of commit order", src)
		}
	}
	t.Logf("%d copies received for %d applied events over %d kills", len(got), total, rounds)
}

func firstCopies(msgs []testbroker.Received) []testbroker.Received {
	seen := map[string]bool{}
	var out []testbroker.Received
	for _, m := range msgs {
		if k := m.User["replayguard-key"]; !seen[k] {
			seen[k] = true
			out = append(out, m)
		}
	}
	return out
}

type auditLine struct {
	Position uint64   `json:"position"`
	Key      string   `json:"key"`
	Outcome  string   `json:"outcome"`
	Source   []string `json:"source"`
}

func auditRecords(t *testing.T, cfg string) []auditLine {
	t.Helper()
	var out []auditLine
	sc := bufio.NewScanner(strings.NewReader(mustRun(t, "", "audit", "export", "-c", cfg)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("waited %s until %s", time.Since(start).Round(time.Millisecond), what) }()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricSum adds up every series of a metric on /metrics.
func metricSum(t *testing.T, listen, name string) float64 {
	t.Helper()
	_, body := get(t, "http://"+listen+"/metrics")
	sum := 0.0
	for _, line := range strings.Split(body, "\n") {
		if line == name || strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}
