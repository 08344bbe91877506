package consume

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// TestAFailedJoinIsTriedAgainWhileTheConnectionHolds: the broker granted
// the group's subscription, but the store did not record it (a store
// error of a moment). The member tries again until the store records it:
// else its share would stay out of the group, or marked lost from a
// connection lost before, and a live member would adopt its session from
// it while it is connected. A connection lost meanwhile ends the tries.
func TestAFailedJoinIsTriedAgainWhileTheConnectionHolds(t *testing.T) {
	for _, lose := range []bool{false, true} {
		name := map[bool]string{false: "the connection holds", true: "the connection is lost"}[lose]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var joins atomic.Int32
			l := &Leaving{Group: "g", Log: slog.New(slog.DiscardHandler),
				Join: func(context.Context) error {
					if joins.Add(1) == 1 {
						return errors.New("store: connection reset")
					}
					return nil
				},
				Quit: func(context.Context) error { return nil }}
			l.Subscribed(ctx, l.Connection())
			if lose {
				l.Lost()(ctx)
			}
			if lose {
				time.Sleep(2500 * time.Millisecond) // past the first try again, at 1s
				if n := joins.Load(); n != 1 {
					t.Fatalf("Join ran %d times, the connection lost after the first: want 1", n)
				}
				return
			}
			for deadline := time.Now().Add(10 * time.Second); joins.Load() < 2; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("Join ran %d times within 10s of its failure, the connection holding: want it tried again", joins.Load())
				}
			}
			time.Sleep(1500 * time.Millisecond)
			if n := joins.Load(); n != 2 {
				t.Fatalf("Join ran %d times, want 2: it succeeded the second time", n)
			}
		})
	}
}
