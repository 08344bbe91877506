package consume

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is the consumer side of a Batches under test: it notes every
// call in order.
type recorder struct {
	calls  []string
	failAt int // the Commit call that fails, 1-based; 0: none
	n      int
}

func (r *recorder) batches(q *Queue[int], fatal chan error) *Batches[int] {
	return &Batches[int]{Name: "test", Queue: q, Size: 3, Linger: time.Millisecond, Fatal: fatal,
		Commit: func(_ context.Context, b []int) error {
			r.n++
			if r.n == r.failAt {
				return context.Canceled
			}
			r.calls = append(r.calls, "commit"+sprint(b))
			return nil
		},
		BeforeAck: func() { r.calls = append(r.calls, "before-ack") },
		Ack:       func(b []int) { r.calls = append(r.calls, "ack"+sprint(b)) },
		Log:       slog.New(slog.DiscardHandler),
		Observer:  source.ObserverFunc(func(e source.Event) { r.calls = append(r.calls, e.Kind.String()) }),
	}
}

func sprint(b []int) string {
	s := ""
	for _, v := range b {
		s += " " + string(rune('0'+v))
	}
	return s
}

func TestBatches(t *testing.T) {
	t.Run("batches are committed, then acknowledged, in order, at most Size at a time", func(t *testing.T) {
		q, fatal, r := NewQueue[int](), make(chan error, 1), &recorder{}
		for i := 1; i <= 5; i++ {
			q.Push(i)
		}
		refused := errors.New("refused")
		b := r.batches(q, fatal)
		b.Commit = func(ctx context.Context, batch []int) error { // the refusal comes after two batches
			r.calls = append(r.calls, "commit"+sprint(batch))
			if len(r.calls) > 3 {
				fatal <- refused
			}
			return nil
		}
		rest, err := b.Consume(context.Background())
		if !errors.Is(err, refused) || len(rest) != 0 {
			t.Fatalf("Consume = %v, %v; want nothing in hand and the refusal", rest, err)
		}
		want := []string{"commit 1 2 3", "before-ack", "ack 1 2 3", "commit 4 5", "before-ack", "ack 4 5"}
		if !slices.Equal(r.calls, want) {
			t.Fatalf("calls %q, want %q", r.calls, want)
		}
	})
	t.Run("shutdown returns the batch in hand, and the drain commits it", func(t *testing.T) {
		q, r := NewQueue[int](), &recorder{failAt: 1}
		q.Push(1)
		q.Push(2)
		ctx, cancel := context.WithCancel(context.Background())
		b := r.batches(q, make(chan error))
		b.Commit = func(context.Context, []int) error { cancel(); return context.Canceled }
		rest, err := b.Consume(ctx)
		if err != nil || !slices.Equal(rest, []int{1, 2}) {
			t.Fatalf("Consume = %v, %v; want [1 2] in hand", rest, err)
		}
		b = r.batches(q, make(chan error))
		r.failAt = 0
		b.Drain(context.Background(), append(rest, 3, 4))
		want := []string{"commit 1 2 3", "ack 1 2 3", "commit 4", "ack 4"}
		if !slices.Equal(r.calls, want) {
			t.Fatalf("calls %q, want %q", r.calls, want)
		}
	})
	t.Run("what the drain cannot commit is abandoned", func(t *testing.T) {
		r := &recorder{failAt: 2}
		r.batches(NewQueue[int](), make(chan error)).Drain(context.Background(), []int{1, 2, 3, 4})
		want := []string{"commit 1 2 3", "ack 1 2 3", "abandoned"}
		if !slices.Equal(r.calls, want) {
			t.Fatalf("calls %q, want %q", r.calls, want)
		}
	})
}

func TestReportAcks(t *testing.T) {
	var got []source.Event
	b := &Batches[int]{Name: "test", Log: slog.New(slog.DiscardHandler),
		Observer: source.ObserverFunc(func(e source.Event) { got = append(got, e) })}
	t.Run("a batch acknowledged whole is reported acked, with the oldest one's lag", func(t *testing.T) {
		got = nil
		b.ReportAcks(3, 3, time.Now().Add(-time.Second))
		if len(got) != 1 || got[0].Kind != source.Acked || got[0].N != 3 || got[0].Lag < time.Second {
			t.Fatalf("events %+v", got)
		}
	})
	t.Run("deliveries whose connection dropped are reported dropped", func(t *testing.T) {
		got = nil
		b.ReportAcks(3, 1, time.Now())
		if len(got) != 2 || got[0].Kind != source.Acked || got[0].N != 1 || got[1].Kind != source.AckDropped || got[1].N != 2 {
			t.Fatalf("events %+v", got)
		}
	})
	t.Run("a batch none of which was acknowledged is reported dropped only", func(t *testing.T) {
		got = nil
		b.ReportAcks(2, 0, time.Time{})
		if len(got) != 1 || got[0].Kind != source.AckDropped || got[0].N != 2 {
			t.Fatalf("events %+v", got)
		}
	})
}
