package forward_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
)

// An entry held before the drainer starts is no news to it: its lanes
// back off after their first failure as long as they planned (here an
// hour), and do not try again at once. The entries held in the store at
// the start were taken for ones an operator had just held, which cut the
// first backoff short: a second attempt came a few milliseconds after
// the first, whatever the receiver's Retry-After or the backoff said.
func TestEntriesHeldBeforeTheStartCutNoBackoffShort(t *testing.T) {
	var attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		http.Error(w, "dispatch is busy", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	wh, err := forward.NewWebhook(forward.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{MinBackoff: time.Hour, MaxBackoff: time.Hour, Poll: time.Hour})
	ctx := context.Background()
	decs, err := r.eng.Process(ctx, []engine.Message{incident("e7", 1), incident("e7", 2)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.HoldPending(ctx, "", engine.OutboxID(decs[0].Position, 0), "held in an earlier run", "duty officer"); err != nil {
		t.Fatal(err)
	}
	r.run()
	waitFor(t, "the first attempt", func() bool { return attempts.Load() >= 1 && r.d.Status().Warning() != "" })
	time.Sleep(500 * time.Millisecond) // a try cut short comes within milliseconds
	if n := attempts.Load(); n != 1 {
		t.Fatalf("%d attempts within half a second of the first, backing off for an hour", n)
	}
}
