package forward_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
)

// TestAFullOutboxHoldsBatchesBackUntilTheDownstreamTakesEntries: with the
// webhook down, batches are admitted until the outbox holds MaxEntries;
// the next waits (AdmitWithin refuses it, saying why), and is admitted by
// itself once the webhook is back.
func TestAFullOutboxHoldsBatchesBackUntilTheDownstreamTakesEntries(t *testing.T) {
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "dispatch is down", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	wh, _ := forward.NewWebhook(forward.WebhookOptions{})
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		// Poll: the depth Run counts at its start may include the first
		// commit twice (a count errs on the high side until the next).
		forward.Options{MaxEntries: 5, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 20 * time.Millisecond})
	r.run()
	ctx := context.Background()
	r.keys(ctx, incident("e1", 1), incident("e1", 2), incident("e1", 3))
	waitFor(t, "the drainer counting 3 entries", func() bool { n, _ := r.d.Depth(); return n == 3 })
	// The entries of batches decided and not yet committed count too.
	if err := r.d.AdmitWithin(50*time.Millisecond)(ctx, func() int { return 2 }); !errors.Is(err, forward.ErrFull) {
		t.Fatalf("AdmitWithin, 3 entries pending and 2 in flight of 5: %v", err)
	}
	if err := r.d.AdmitWithin(50*time.Millisecond)(ctx, func() int { return 1 }); err != nil || r.d.Status().Full {
		t.Fatalf("AdmitWithin, 3 entries pending and 1 in flight of 5: %v, %+v", err, r.d.Status())
	}
	r.keys(ctx, incident("e1", 4), incident("e1", 5)) // admitted below the bound: now at it
	waitFor(t, "the output reports the failure", func() bool { return r.d.Status().Outputs[0].Failing })
	waitFor(t, "the drainer counting 5 entries", func() bool { n, _ := r.d.Depth(); return n == 5 })

	err := r.d.AdmitWithin(50*time.Millisecond)(ctx, nil)
	if !errors.Is(err, forward.ErrFull) || !strings.Contains(err.Error(), "5 of 5 entries pending") ||
		!strings.Contains(err.Error(), "502 Bad Gateway") {
		t.Fatalf("AdmitWithin on a full outbox: %v", err)
	}
	if st := r.d.Status(); !st.Full || !strings.Contains(st.Blocked(), "outbox full: 5 of 5 entries pending") {
		t.Fatalf("status: %+v, %q", st, st.Blocked())
	}
	admitted := make(chan error, 1)
	go func() { _, err := r.eng.Process(ctx, []engine.Message{incident("e1", 6)}); admitted <- err }()
	select {
	case err := <-admitted:
		t.Fatalf("a batch was decided while the outbox was full: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	up.Store(true)
	select {
	case err := <-admitted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the batch was not admitted once the webhook was back")
	}
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	if st := r.d.Status(); st.Full || st.Blocked() != "" || !st.FullSince.IsZero() {
		t.Fatalf("status after the drain: %+v (full since a time once it has room: it was full)", st)
	}
	// A caller giving up leaves the batch undecided.
	up.Store(false)
	r.keys(ctx, incident("e1", 7), incident("e1", 8), incident("e1", 9), incident("e1", 10), incident("e1", 11))
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := r.eng.Process(cctx, []engine.Message{incident("e1", 12)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Process with the outbox full and a deadline: %v", err)
	}
	up.Store(true)
	r.keys(ctx, incident("e1", 12)) // decided now, not before: applied, not a duplicate
}

// TestAdmitLooksAgainWhenTheEntriesInFlightLand: entries in flight become
// pending, or none when their commit fails, without entries leaving the
// outbox; a full Admit that counted them looks again soon, not at the
// next poll.
func TestAdmitLooksAgainWhenTheEntriesInFlightLand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "dispatch is down", http.StatusBadGateway)
	}))
	defer srv.Close()
	wh, _ := forward.NewWebhook(forward.WebhookOptions{})
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{MaxEntries: 5, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: time.Hour})
	ctx := context.Background()
	r.keys(ctx, incident("e1", 1), incident("e1", 2), incident("e1", 3))
	r.run() // after the commits: its first count is exact, and the next an hour away
	waitFor(t, "the drainer counting 3 entries", func() bool { n, _ := r.d.Depth(); return n == 3 })
	var inFlight atomic.Int64
	inFlight.Store(2) // a batch of 2 whose commit then fails
	go func() { time.Sleep(30 * time.Millisecond); inFlight.Store(0) }()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.d.Admit(actx, func() int { return int(inFlight.Load()) }); err != nil {
		t.Fatalf("Admit once the entries in flight are gone: %v", err)
	}
	if r.d.Status().Full {
		t.Fatalf("admitted, and still reported full: %+v", r.d.Status())
	}
}

// TestAnOutboxAtItsBoundIsReportedFullBeforeABatchWaits: a drainer
// starting on an outbox already at its bound (a restart after a
// downstream outage filled it, or a bound lowered below its depth), with
// the downstream still down, reports it full, with its depth, before any
// batch has come to wait; and not full once the downstream took them.
func TestAnOutboxAtItsBoundIsReportedFullBeforeABatchWaits(t *testing.T) {
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "dispatch is down", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	wh, _ := forward.NewWebhook(forward.WebhookOptions{})
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{MaxEntries: 3, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 20 * time.Millisecond})
	ctx := context.Background()
	r.keys(ctx, incident("e1", 1), incident("e1", 2), incident("e1", 3))
	r.run()
	waitFor(t, "the output reports the failure", func() bool { return r.d.Status().Outputs[0].Failing })
	if st := r.d.Status(); !st.Full || !strings.Contains(st.Blocked(), "outbox full: 3 of 3 entries pending") {
		t.Fatalf("status of an outbox at its bound, no batch waiting: %+v, blocked %q", st, st.Blocked())
	}
	up.Store(true)
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.d.Depth(); return n == 0 })
	if st := r.d.Status(); st.Full || st.Blocked() != "" {
		t.Fatalf("status after the drain: %+v", st)
	}
}
