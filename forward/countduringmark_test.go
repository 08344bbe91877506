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

// countBeforeMark is an outbox store whose first OutboxDone waits, before
// it removes anything, until a count armed by the test has been taken:
// that count sees the delivered entries still pending, and the mark's
// removal lands before the count is returned.
type countBeforeMark struct {
	*memory.Store
	once    sync.Once
	marking chan int      // the first mark's entry count, before it writes
	write   chan struct{} // closed by the armed count: the first mark writes
	written chan struct{} // closed once it has
	armed   atomic.Bool
}

func (c *countBeforeMark) OutboxDone(ctx context.Context, member string, ids []uint64) error {
	first := false
	c.once.Do(func() { first = true })
	if !first {
		return c.Store.OutboxDone(ctx, member, ids)
	}
	c.marking <- len(ids)
	<-c.write
	err := c.Store.OutboxDone(ctx, member, ids)
	close(c.written)
	return err
}

func (c *countBeforeMark) OutboxDepth(ctx context.Context, member string) (int, error) {
	n, err := c.Store.OutboxDepth(ctx, member)
	if c.armed.CompareAndSwap(true, false) {
		close(c.write)
		<-c.written
	}
	return n, err
}

// TestTheDepthLeavesDeliveredEntriesWhoseMarkACountOverlappedBeforeTheNextPoll:
// a count of the outbox (the poll's, Admit's) that reads the store before
// a mark of delivered entries removes them, while the mark is under way,
// counts them twice, once in the store and once as leaving. The depth
// (replayguard_outbox_entries, the dashboard's pending bar) must come back
// to the store's count once the mark is done, not stay that many too
// high until the next poll (an hour here).
func TestTheDepthLeavesDeliveredEntriesWhoseMarkACountOverlappedBeforeTheNextPoll(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	wh, err := forward.NewWebhook(forward.WebhookOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := &countBeforeMark{marking: make(chan int, 1), write: make(chan struct{}), written: make(chan struct{})}
	r := newRigWith(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{Poll: time.Hour}, func(s *memory.Store) engine.OutboxStore { c.Store = s; return c })
	r.run()
	ctx := context.Background()
	if _, err := r.eng.Process(ctx, []engine.Message{incident("e1", 1), incident("e1", 2), incident("e1", 3)}); err != nil {
		t.Fatal(err)
	}
	k := <-c.marking // delivered; about to be removed from the store
	c.armed.Store(true)
	if err := r.d.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every entry removed from the store", func() bool {
		n, err := r.store.OutboxDepth(ctx, "")
		return err == nil && n == 0
	})
	waitFor(t, "the depth to come back to the store's 0", func() bool { depth, _ := r.d.Depth(); return depth == 0 })
	t.Logf("the first mark removed %d entries", k)
}
