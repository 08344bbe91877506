package consume

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// flipCtx is a context cancelled exactly between two calls of Err: as if
// cancel ran on another goroutine at that instant.
type flipCtx struct {
	context.Context
	armed atomic.Bool
	calls atomic.Int32
	done  chan struct{}
	once  sync.Once
}

func (c *flipCtx) Err() error {
	if c.armed.Load() && c.calls.Add(1) >= 2 {
		c.once.Do(func() { close(c.done) })
		return context.Canceled
	}
	return nil
}

func (c *flipCtx) Done() <-chan struct{} { return c.done }

// TestAStopBetweenTwoLooksAtTheContextLandsTheBatchInFlight: a stop that
// comes just after Run has looked at ctx once, with a batch in flight,
// still lands that batch: every delivery collected is acknowledged or
// handed back, in order.
func TestAStopBetweenTwoLooksAtTheContextLandsTheBatchInFlight(t *testing.T) {
	ctx := &flipCtx{Context: context.Background(), done: make(chan struct{})}
	r := &recorder{}
	var collected int
	l := Loop[int]{Size: 3,
		Collect: func(ctx context.Context, _ <-chan struct{}) ([]int, error) {
			collected++
			switch collected {
			case 1:
				return []int{1, 2, 3}, nil
			case 2:
				ctx.(*flipCtx).armed.Store(true) // cancelled right after Run's first look at ctx
				return []int{4}, nil
			}
			return nil, nil // ctx is done
		},
		Commit: func(context.Context, []int) error { return nil },
		Submit: func(_ context.Context, b []int) *Flight {
			r.calls = append(r.calls, "submit"+sprint(b))
			return &Flight{landed: make(chan struct{}), n: len(b)}
		},
		Land: func(f *Flight) error { // the commit is durable once waited for
			if !f.done() {
				land(f, nil)
			}
			return f.err
		},
		BeforeAck: func(time.Time) {},
		Ack:       func(b []int) { r.calls = append(r.calls, "ack"+sprint(b)) },
	}
	rest, committed, err := l.Run(ctx)
	// Every delivery collected is acknowledged or handed back, in order.
	var seen []int
	for _, c := range r.calls {
		if strings.HasPrefix(c, "ack") {
			for _, f := range strings.Fields(c[3:]) {
				seen = append(seen, int(f[0]-'0'))
			}
		}
	}
	seen = append(seen, rest...)
	if err != nil || len(committed) > 0 || !slices.Equal(seen, []int{1, 2, 3, 4}) {
		t.Fatalf("Run = %v, %v, %v, calls %q: acknowledged then in hand %v, want [1 2 3 4]", rest, committed, err, r.calls, seen)
	}
}
