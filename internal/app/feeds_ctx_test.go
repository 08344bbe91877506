package app

import (
	"context"
	"sync"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// ctxGated is gated whose calls fail once their context is done, as the
// engine's commit does.
type ctxGated struct{ gated }

func (g *ctxGated) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	<-g.gate
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return g.echo.Process(ctx, msgs)
}

// TestACombinedBatchIsNotFailedByAnotherFeedsStop: at a stop, one feed's
// consumer may still pass a batch under its cancelled context while
// another feed drains under a live one (each feed's Run drains under its
// own shutdown context). Combined into one call, the draining feed's batch
// must not fail because the first batch's context is done: its commit
// would be reported failed, and its drain wait a retry.
func TestACombinedBatchIsNotFailedByAnotherFeedsStop(t *testing.T) {
	g := &ctxGated{gated{echo: echo{t: t}, gate: make(chan struct{})}}
	procs := FeedProcessors(g, []string{"a", "b", "c"}, nil, nil)
	one := procs[0].one
	stopped, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var drainErr error
	wg.Go(func() { procs[0].Process(context.Background(), []engine.Message{{Topic: "a"}}) })
	waitFor(t, func() bool { one.mu.Lock(); defer one.mu.Unlock(); return one.busy && len(one.queue) == 0 })
	wg.Go(func() { procs[1].Process(stopped, []engine.Message{{Topic: "b"}}) })
	waitFor(t, func() bool { one.mu.Lock(); defer one.mu.Unlock(); return len(one.queue) == 1 })
	wg.Go(func() { _, drainErr = procs[2].Process(context.Background(), []engine.Message{{Topic: "c"}}) })
	waitFor(t, func() bool { one.mu.Lock(); defer one.mu.Unlock(); return len(one.queue) == 2 })
	stop() // feed b's consumer stops
	close(g.gate)
	wg.Wait()
	if drainErr != nil {
		t.Fatalf("feed c's drain, under a live context, failed: %v", drainErr)
	}
}
