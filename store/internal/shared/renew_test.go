package shared

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// TestRenewLoopRetriesSoonAfterAFailure: renewals that fail (the store
// down) are tried again every retry, not a whole interval later; a lease
// lost to another holder waits the interval.
func TestRenewLoopRetriesSoonAfterAFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		within time.Duration // the sixth renewal comes within this of the start
		soon   bool
	}{
		{"the store down", errors.New("connection refused"), 900 * time.Millisecond, true},
		{"the lease lost", fmt.Errorf("%w: taken", engine.ErrMemberHeld), 900 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var calls, failures atomic.Int32
			sixth := make(chan time.Duration, 1)
			start := time.Now()
			go RenewLoop(ctx, 200*time.Millisecond, 5*time.Millisecond, func() error {
				if calls.Add(1) == 6 {
					sixth <- time.Since(start)
				}
				if calls.Load() <= 5 {
					return tc.err
				}
				return nil
			}, func(error) { failures.Add(1) })
			select {
			case took := <-sixth:
				if !tc.soon {
					t.Fatalf("the sixth renewal after %v: a lost lease was asked for again before the interval", took)
				}
				if f := failures.Load(); f != 5 {
					t.Fatalf("%d failures told, want 5", f)
				}
			case <-time.After(tc.within):
				if tc.soon {
					t.Fatalf("%d renewals within %v: failed renewals wait the whole interval", calls.Load(), tc.within)
				}
			}
		})
	}
}
