package shared

import (
	"context"
	"errors"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// RenewLoop calls renew every interval until ctx is done, and after a
// renewal that failed again every retry: a store that was down for a
// moment must not cost a live member its lease because the next renewal
// was a whole interval away (down 7 s with renewals every 5 s of a 15 s
// lease, two renewals failed and the third came too late). A lease lost
// to another holder is not asked for again sooner. failed is told of each
// failure.
func RenewLoop(ctx context.Context, interval, retry time.Duration, renew func() error, failed func(error)) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next := interval
		if err := renew(); err != nil && ctx.Err() == nil {
			failed(err)
			if !errors.Is(err, engine.ErrMemberHeld) {
				next = retry
			}
		}
		t.Reset(next)
	}
}
