package forward_test

import (
	"context"
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

// pausingDone is an outbox store whose first OutboxDone, once it has
// removed its entries, waits until release is closed: the marker between
// its store write and its removed() call, where a recount can run.
type pausingDone struct {
	*memory.Store
	once    sync.Once
	marked  chan int // the first mark's entry count, once written
	release chan struct{}
}

func (p *pausingDone) OutboxDone(ctx context.Context, member string, ids []uint64) error {
	if err := p.Store.OutboxDone(ctx, member, ids); err != nil {
		return err
	}
	p.once.Do(func() {
		p.marked <- len(ids)
		<-p.release
	})
	return nil
}

// TestARecountDuringAMarkKeepsTheOutboxWithinItsBound: a recount that
// runs after the marker removed delivered entries from the store, and
// before it took them off the count, must not have them taken off twice:
// the count would fall below the store's, and Admit would let the outbox
// pass MaxEntries by that mark's entries (up to (markAhead+1)·Batch) until
// the next poll.
func TestARecountDuringAMarkKeepsTheOutboxWithinItsBound(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "dispatch is down", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	wh, _ := forward.NewWebhook(forward.WebhookOptions{})
	pd := &pausingDone{marked: make(chan int, 1), release: make(chan struct{})}
	const maxEntries = 5
	r := newRigWith(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{MaxEntries: maxEntries, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: time.Hour},
		func(s *memory.Store) engine.OutboxStore { pd.Store = s; return pd })
	r.run()
	ctx := context.Background()
	r.keys(ctx, incident("e1", 1), incident("e1", 2), incident("e1", 3))
	k := <-pd.marked // delivered, and removed from the store; not yet from the count
	up.Store(false)  // from now on entries stay pending
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, _ = r.d.Drain(dctx) // its first act is a recount: the store holds none of the 3
	cancel()
	close(pd.release) // the marker takes its k entries off the count
	// Time for the marker to finish: without it the old double count could
	// be missed, never a correct count reported wrong.
	time.Sleep(20 * time.Millisecond)

	seq := 4
	for {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := r.eng.Process(pctx, []engine.Message{incident("e1", seq)})
		cancel()
		if err != nil {
			break
		}
		seq++
		if seq > 40 {
			break
		}
	}
	depth, err := r.store.OutboxDepth(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first mark removed %d entries; batches of one admitted: %d; outbox holds %d of max %d", k, seq-4, depth, maxEntries)
	if depth > maxEntries { // batches of one: admitted at most up to the bound
		t.Fatalf("the outbox holds %d pending entries, past MaxEntries %d by %d", depth, maxEntries, depth-maxEntries)
	}
}
