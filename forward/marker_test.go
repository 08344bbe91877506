package forward_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/store/memory"
)

// countingOutput takes every entry and counts the deliveries of each key.
type countingOutput struct {
	mu  sync.Mutex
	got map[engine.Hash]int
	n   int
}

func (o *countingOutput) Deliver(_ context.Context, es []engine.OutboxEntry) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range es {
		o.got[e.Key]++
		o.n++
	}
	return len(es), nil
}

func (o *countingOutput) Close() error { return nil }

func (o *countingOutput) deliveries() (n int, keys map[engine.Hash]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys = make(map[engine.Hash]int, len(o.got))
	for k, v := range o.got {
		keys[k] = v
	}
	return o.n, keys
}

// markingStore is the memory store with OutboxDone held at a gate, or
// failing.
type markingStore struct {
	*memory.Store
	gate  chan struct{} // OutboxDone waits for it to close, when set
	fails atomic.Int32  // how many of the next OutboxDone calls fail
	calls atomic.Int32
}

func (s *markingStore) OutboxDone(ctx context.Context, member string, ids []uint64) error {
	s.calls.Add(1)
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.fails.Add(-1) >= 0 {
		return errors.New("the store is failing over")
	}
	return s.Store.OutboxDone(ctx, member, ids)
}

func markRig(t *testing.T, wrap func(*memory.Store) *markingStore) (*rig, *markingStore, *countingOutput) {
	out := &countingOutput{got: map[engine.Hash]int{}}
	var ms *markingStore
	r := newRigWith(t, engine.ForwardSpec{Webhook: "http://downstream.invalid/"}, map[string]forward.Output{engine.OutputWebhook: out},
		forward.Options{Batch: 4, Logger: testLogger(t)},
		func(s *memory.Store) engine.OutboxStore { ms = wrap(s); return ms })
	return r, ms, out
}

func TestALaneGoesOnDeliveringWhileItsMarksWaitForTheStore(t *testing.T) {
	gate := make(chan struct{})
	r, ms, out := markRig(t, func(s *memory.Store) *markingStore { return &markingStore{Store: s, gate: gate} })
	r.run()
	ctx := context.Background()
	var msgs []engine.Message
	for i := range 16 {
		msgs = append(msgs, incident("e1", i+1))
	}
	r.keys(ctx, msgs...) // one commit: the lane reads pages of 4
	// Pages of 4: the first page's mark waits at the gate; the lane goes
	// on with the pages after it, up to the marks it may leave waiting.
	waitFor(t, "three pages delivered while the first one's mark waits", func() bool { n, _ := out.deliveries(); return n >= 12 })
	if n, _ := r.store.OutboxDepth(ctx, ""); n != 16 {
		t.Fatalf("depth %d while the marks wait, want 16", n)
	}
	close(gate)
	waitFor(t, "the outbox is empty and the drainer counts it so", func() bool {
		n, _ := r.store.OutboxDepth(ctx, "")
		depth, _ := r.d.Depth()
		return n == 0 && depth == 0
	})
	n, keys := out.deliveries()
	if n != 16 || len(keys) != 16 {
		t.Fatalf("%d deliveries of %d keys, want each of 16 once", n, len(keys))
	}
	if calls := ms.calls.Load(); calls >= 4 {
		t.Fatalf("%d marks for 4 pages, want the pages that waited marked together", calls)
	}
}

func TestAFailedMarkSendsItsEntriesAgainAndLosesNone(t *testing.T) {
	r, ms, out := markRig(t, func(s *memory.Store) *markingStore { m := &markingStore{Store: s}; m.fails.Store(1); return m })
	r.run()
	ctx := context.Background()
	var want []string
	for i := range 8 {
		want = append(want, r.keys(ctx, incident("e1", i+1))...)
	}
	waitFor(t, "the outbox is empty", func() bool { n, _ := r.store.OutboxDepth(ctx, ""); return n == 0 })
	n, keys := out.deliveries()
	if len(keys) != len(want) {
		t.Fatalf("%d keys delivered, want %d", len(keys), len(want))
	}
	twice := 0
	for _, k := range keys {
		if k > 1 {
			twice++
		}
	}
	if twice == 0 || n <= len(want) {
		t.Fatalf("%d deliveries, %d keys twice: want the entries of the failed mark sent again", n, twice)
	}
	if ms.calls.Load() < 2 {
		t.Fatalf("%d marks, want the failed one and the ones after it", ms.calls.Load())
	}
}

func TestAStoppingLaneMarksWhatItDelivered(t *testing.T) {
	gate := make(chan struct{})
	r, _, out := markRig(t, func(s *memory.Store) *markingStore { return &markingStore{Store: s, gate: gate} })
	r.run()
	ctx := context.Background()
	var msgs []engine.Message
	for i := range 8 {
		msgs = append(msgs, incident("e1", i+1))
	}
	r.keys(ctx, msgs...)
	waitFor(t, "two pages delivered", func() bool { n, _ := out.deliveries(); return n == 8 })
	go func() {
		time.Sleep(50 * time.Millisecond) // the stop is under way, its lanes' contexts done
		close(gate)
	}()
	r.stop()
	if n, _ := r.store.OutboxDepth(ctx, ""); n != 0 {
		t.Fatalf("%d delivered entries left pending by the stop, want 0", n)
	}
}
