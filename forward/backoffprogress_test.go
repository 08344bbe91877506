package forward_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
)

// A receiver behind a load balancer with one bad backend of four answers
// every fourth POST 503 and takes the others: each failed attempt comes
// after entries it delivered. The wait after such an attempt starts again
// from the shortest; doubling from one failure to the next, ten of them
// would hold the lane for more than 25 s (up to 30 s a wait), every entry
// behind waiting.
func TestAnAttemptThatDeliveredEntriesBeforeItFailedRestartsTheBackoff(t *testing.T) {
	var mu sync.Mutex
	posts, taken := 0, map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		posts++
		if posts%4 == 0 {
			http.Error(w, "bad backend", http.StatusServiceUnavailable)
			return
		}
		taken[r.Header.Get("Idempotency-Key")]++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	out, err := forward.NewWebhook(forward.WebhookOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: out},
		forward.Options{MinBackoff: forward.DefaultMinBackoff, MaxBackoff: forward.DefaultMaxBackoff})
	r.run()
	ctx := context.Background()
	var msgs []engine.Message
	for seq := 1; seq <= 30; seq++ {
		msgs = append(msgs, incident("e1", seq))
	}
	keys := r.keys(ctx, msgs...)

	start := time.Now()
	waitFor(t, "every entry delivered", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	took := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	for i, k := range keys {
		if taken[k] != 1 {
			t.Fatalf("entry %d taken %d times, want once", i+1, taken[k])
		}
	}
	if fails := posts - len(keys); fails < 9 || took > 10*time.Second {
		t.Fatalf("%d failed POSTs took %v", fails, took.Round(time.Millisecond))
	}
	t.Logf("%d failed POSTs, drained in %v", posts-len(keys), took.Round(time.Millisecond))
}
