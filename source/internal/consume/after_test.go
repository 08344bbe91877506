package consume

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAStopWhileRecommittingKeepsTheBatchCommittedBehindIt: a batch fails
// to commit while the next one, decided on its own (a shared store commits
// within Submit), committed. If the loop is stopped while it commits the
// failed batch again, the batch behind it, committed but not yet
// acknowledged, must still be acknowledged or handed back to the drain, in
// order: left out, the drain acknowledges the deliveries after it while it
// stays unacknowledged (PUBACKs out of receive order).
func TestAStopWhileRecommittingKeepsTheBatchCommittedBehindIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &recorder{}
	var collected int
	var flights []*Flight
	l := Loop[int]{Size: 3,
		Collect: func(ctx context.Context, _ <-chan struct{}) ([]int, error) {
			collected++
			switch collected {
			case 1:
				return []int{1, 2, 3}, nil
			case 2:
				return []int{4}, nil
			}
			<-ctx.Done()
			return nil, nil
		},
		Commit: func(ctx context.Context, b []int) error {
			// the store is down: retried until the stop
			r.calls = append(r.calls, "commit"+sprint(b))
			cancel()
			return ctx.Err()
		},
		Submit: func(_ context.Context, b []int) *Flight {
			r.calls = append(r.calls, "submit"+sprint(b))
			f := &Flight{landed: make(chan struct{}), n: len(b)}
			flights = append(flights, f)
			return f
		},
		Land: func(f *Flight) error {
			if !f.done() {
				var err error
				if f == flights[0] {
					err = errors.New("injected commit failure")
				}
				land(f, err)
			}
			return f.err
		},
		BeforeAck: func(time.Time) {},
		Ack:       func(b []int) { r.calls = append(r.calls, "ack"+sprint(b)) },
	}
	rest, committed, _ := l.Run(ctx)
	var seen []int
	for _, c := range r.calls {
		if strings.HasPrefix(c, "ack") {
			for _, f := range strings.Fields(c[3:]) {
				seen = append(seen, int(f[0]-'0'))
			}
		}
	}
	seen = append(append(seen, rest...), committed...)
	if !slices.Equal(seen, []int{1, 2, 3, 4}) {
		t.Fatalf("Run handed back %v and %v committed, calls %q: acknowledged then in hand %v, want [1 2 3 4]", rest, committed, r.calls, seen)
	}
}
