package forward_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/store/memory"
)

// refusingHook takes every POST but refuses sequence 3 with 422 until
// fixed, and counts what it took by key.
type refusingHook struct {
	fixed atomic.Bool
	mu    sync.Mutex
	got   map[string]int
	seqs  []string // in arrival order
}

func (h *refusingHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	seq := r.Header.Get("Replayguard-Sequence")
	if seq == "3" && !h.fixed.Load() {
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"error":"unit U3 is unknown to dispatch"}`)
		return
	}
	h.mu.Lock()
	h.got[r.Header.Get("Idempotency-Key")]++
	h.seqs = append(h.seqs, seq)
	h.mu.Unlock()
}

// once checks that every key was taken exactly once, and nothing else.
func (h *refusingHook) once(t *testing.T, keys []string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		if h.got[k] != 1 {
			t.Fatalf("key %s delivered %d times, want once (arrivals %v)", k, h.got[k], h.seqs)
		}
	}
	if len(h.got) != len(keys) {
		t.Fatalf("%d keys delivered, want %d", len(h.got), len(keys))
	}
}

func (h *refusingHook) taken(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[key] > 0
}

// heldOne waits until the outbox of member holds nothing pending and one
// held entry, and returns it.
func heldOne(t *testing.T, s engine.OutboxStore, member string) engine.HeldEntry {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "the refused entry is held and the rest delivered", func() bool {
		n, _ := s.OutboxDepth(ctx, member)
		hs, _ := s.OutboxHeld(ctx)
		return n == 0 && len(hs) == 1
	})
	hs, _ := s.OutboxHeld(ctx)
	return hs[0]
}

// TestARetriedEntryIsDeliveredOnce: the webhook refuses one entry with
// 422, it is held; the webhook is fixed and an operator retries the entry
// through this process's engine: it is delivered once, at once (the poll
// is an hour away), and nothing else is sent again.
func TestARetriedEntryIsDeliveredOnce(t *testing.T) {
	hook := &refusingHook{got: map[string]int{}}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	wh, err := forward.NewWebhook(forward.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{Poll: time.Hour})
	r.run()
	ctx := context.Background()
	keys := r.keys(ctx, incident("e1", 1), incident("e1", 2), incident("e1", 3), incident("e1", 4), incident("e1", 5))
	h := heldOne(t, r.store, "")
	if h.Sequence != 3 {
		t.Fatalf("held %+v, want sequence 3", h)
	}
	// Retried too early: refused again, held again.
	if _, err := r.eng.RetryForward(ctx, "", h.ID, "", "duty officer"); err != nil {
		t.Fatalf("RetryForward: %v", err)
	}
	if h2 := heldOne(t, r.store, ""); h2.ID != h.ID {
		t.Fatalf("held %d after the retry, want %d again", h2.ID, h.ID)
	}
	hook.fixed.Store(true)
	keys = append(keys, r.keys(ctx, incident("e1", 6))...)
	waitFor(t, "sequence 6 is delivered", func() bool { return hook.taken(keys[5]) })
	if _, err := r.eng.RetryForward(ctx, "", h.ID, "dispatch knows U3 now", "duty officer"); err != nil {
		t.Fatalf("RetryForward: %v", err)
	}
	waitFor(t, "the retried entry is delivered", func() bool { return hook.taken(keys[2]) })
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	hook.once(t, keys)
	if hs, _ := r.store.OutboxHeld(ctx); len(hs) != 0 {
		t.Fatalf("held after the retry: %+v", hs)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n, err := r.d.Drain(dctx); n != 0 || err != nil {
		t.Fatalf("Drain = %d, %v; want the outbox empty", n, err)
	}
}

// TestARetryByAnotherProcessIsDeliveredAtThePoll: member m1 drains its
// outbox; the refused entry is retried by another process (a command on
// the shared store, with an engine of its own that m1's drainer does not
// hear): m1's drainer finds it at its next poll and delivers it once.
func TestARetryByAnotherProcessIsDeliveredAtThePoll(t *testing.T) {
	hook := &refusingHook{got: map[string]int{}}
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
	wh, _ := forward.NewWebhook(forward.WebhookOptions{})
	d, err := forward.New(forward.Options{Store: m1, Member: "m1", Claimer: m1, Logger: testLogger(t),
		Outputs: map[string]forward.Output{engine.OutputWebhook: wh}, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, m1, engine.Options{Routes: []engine.Route{route}, Observer: d, Admit: d.Admit})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(rctx, eng) }()
	defer func() { cancel(); <-done; d.Close() }()

	cli, err := g.Open("outbox-cli")
	if err != nil {
		t.Fatal(err)
	}
	other, err := engine.New(ctx, cli, engine.Options{Routes: []engine.Route{route}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for round := range 3 {
		var keys []string
		for seq := 1; seq <= 5; seq++ {
			decs, err := eng.Process(ctx, []engine.Message{incident(fmt.Sprint("r", round), seq)})
			if err != nil || decs[0].Outcome != engine.Applied {
				t.Fatalf("decide %d: %v %v", seq, decs, err)
			}
			keys = append(keys, decs[0].Key.String())
		}
		h := heldOne(t, m1, "m1")
		hook.fixed.Store(true)
		if round == 2 {
			time.Sleep(300 * time.Millisecond) // a poll has seen it held
		}
		if _, err := other.RetryForward(ctx, "", h.ID, "", "duty officer"); err != nil {
			t.Fatalf("round %d: RetryForward from another process: %v", round, err)
		}
		waitFor(t, "the entry retried by another process is delivered", func() bool { return hook.taken(keys[2]) })
		waitFor(t, "m1's outbox is empty", func() bool { n, _ := m1.OutboxDepth(ctx, "m1"); return n == 0 })
		hook.once(t, keys)
		hook.fixed.Store(false)
		hook.mu.Lock()
		clear(hook.got)
		hook.mu.Unlock()
	}
}
