package forward_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// countingHook counts the posts of each key, and answers 503 while down.
type countingHook struct {
	down atomic.Bool
	mu   sync.Mutex
	got  map[string]int
}

func (h *countingHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if h.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	h.got[r.Header.Get("Idempotency-Key")]++
	h.mu.Unlock()
}

func (h *countingHook) has(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[key] > 0
}

// TestAForwardTheMemberRecoveredBelowWhatItHadDeliveredIsDelivered: a
// member forwards to a webhook; its store fails over to a replica that
// lacks its last commits, among them an operator's discard, so that the
// deliveries its journal decides again take positions, and outbox ids,
// below the ones it had delivered up to. The reading the webhook had not
// taken before the failover must still be delivered, and the member's
// outbox emptied.
func TestAForwardTheMemberRecoveredBelowWhatItHadDeliveredIsDelivered(t *testing.T) {
	hook := &countingHook{got: map[string]int{}}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	g := memory.NewGroup(time.Hour, 1000)
	route := engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"},
		Sequence: "sequence", Epoch: "boot_id", Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Webhook: srv.URL}}}}
	ctx := context.Background()
	m1, err := g.Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(t.TempDir(), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	wh, _ := forward.NewWebhook(forward.WebhookOptions{})
	d, err := forward.New(forward.Options{Store: m1, Member: "m1", Claimer: m1, Logger: testLogger(t),
		Outputs: map[string]forward.Output{engine.OutputWebhook: wh}, Poll: 50 * time.Millisecond,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, m1, engine.Options{Routes: []engine.Route{route}, Observer: d, Admit: d.Admit, StoreName: "memory", Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(rctx, eng) }()
	defer func() { cancel(); <-done; d.Close() }()

	decide := func(msg engine.Message) engine.Decision {
		t.Helper()
		decs, err := eng.Process(ctx, []engine.Message{msg})
		if err != nil {
			t.Fatal(err)
		}
		return decs[0]
	}
	var keys []string
	for seq := 1; seq <= 5; seq++ {
		keys = append(keys, decide(incident("e1", seq)).Key.String())
	}
	waitFor(t, "readings 1..5 delivered", func() bool { return hook.has(keys[4]) })
	replica := g.Checkpoint()
	keys = append(keys, decide(incident("e1", 6)).Key.String())
	changed := engine.Message{Topic: "incidents/fd/e1", Payload: []byte(`{"agency":"fd","source_id":"e1","boot_id":1,"sequence":6,"casualty_delta":9}`)}
	held := decide(changed)
	if held.Outcome != engine.Conflict {
		t.Fatalf("a changed copy of reading 6: %v, want conflict", held.Outcome)
	}
	if _, err := eng.Discard(ctx, held.Held, "a bad copy", "duty officer"); err != nil {
		t.Fatal(err)
	}
	for seq := 7; seq <= 9; seq++ {
		keys = append(keys, decide(incident("e1", seq)).Key.String())
	}
	waitFor(t, "readings 6..9 delivered", func() bool { return hook.has(keys[8]) })
	hook.down.Store(true)
	last := decide(incident("e1", 10)).Key.String()
	g.FailOver(replica)
	if err := eng.CheckStore(ctx); err != nil {
		t.Fatalf("the member did not recover what the store lost from its journal: %v", err)
	}
	hook.down.Store(false)
	waitFor(t, "reading 10, decided again from the journal, delivered", func() bool { return hook.has(last) })
	waitFor(t, "m1's outbox is empty", func() bool { n, _ := m1.OutboxDepth(ctx, "m1"); return n == 0 })
	for i, k := range keys {
		if !hook.has(k) {
			t.Errorf("reading %d never delivered", i+1)
		}
	}
}
