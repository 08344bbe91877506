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
		Commit: func(ctx context.Context, b []int) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.n++
			if r.n == r.failAt {
				return context.Canceled
			}
			r.calls = append(r.calls, "commit"+sprint(b))
			return nil
		},
		BeforeAck: func(time.Time) { r.calls = append(r.calls, "before-ack") },
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
		rest, committed, err := b.Consume(context.Background())
		if !errors.Is(err, refused) || len(rest) != 0 || len(committed) != 0 {
			t.Fatalf("Consume = %v, %v, %v; want nothing in hand and the refusal", rest, committed, err)
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
		rest, committed, err := b.Consume(ctx)
		if err != nil || !slices.Equal(rest, []int{1, 2}) || len(committed) != 0 {
			t.Fatalf("Consume = %v, %v, %v; want [1 2] in hand", rest, committed, err)
		}
		b = r.batches(q, make(chan error))
		r.failAt = 0
		b.Drain(context.Background(), rest, nil, []int{3, 4})
		want := []string{"commit 1 2 3", "ack 1 2 3", "commit 4", "ack 4"}
		if !slices.Equal(r.calls, want) {
			t.Fatalf("calls %q, want %q", r.calls, want)
		}
	})
	t.Run("what the drain cannot commit is abandoned", func(t *testing.T) {
		r := &recorder{failAt: 2}
		r.batches(NewQueue[int](), make(chan error)).Drain(context.Background(), []int{1, 2, 3, 4}, nil, nil)
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

// acked makes b's Ack also send on the channel it returns.
func acked(b *Batches[int]) <-chan struct{} {
	acks, ack := make(chan struct{}, 8), b.Ack
	b.Ack = func(batch []int) {
		ack(batch)
		acks <- struct{}{}
	}
	return acks
}

// queued is how many deliveries q holds.
func queued(q *Queue[int]) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// land lands f, with err, with the error it lands with.
func land(f *Flight, err error) {
	f.err = err
	close(f.landed)
}

func TestBatchesSubmitted(t *testing.T) {
	// pipelined returns Batches whose Submit hands each flight to the test
	// (on flights) and whose Land and Commit are noted in r.calls.
	pipelined := func(q *Queue[int], r *recorder, linger time.Duration) (*Batches[int], chan *Flight) {
		flights := make(chan *Flight, 4)
		b := r.batches(q, make(chan error))
		b.Linger = linger
		b.Submit = func(_ context.Context, batch []int) *Flight {
			r.calls = append(r.calls, "submit"+sprint(batch))
			f := &Flight{landed: make(chan struct{}), n: len(batch)}
			flights <- f
			return f
		}
		b.Land = func(f *Flight) error {
			<-f.landed
			if f.err != nil {
				r.calls = append(r.calls, "failed")
			}
			return f.err
		}
		return b, flights
	}
	type result struct {
		rest, committed []int
		err             error
	}
	// stop ends Consume, which must hold nothing then, and checks the calls.
	stop := func(t *testing.T, cancel context.CancelFunc, done chan result, r *recorder, want []string) {
		t.Helper()
		cancel()
		if res := <-done; res.err != nil || len(res.rest) != 0 || len(res.committed) != 0 {
			t.Fatalf("Consume = %v, %v, %v; want nothing in hand", res.rest, res.committed, res.err)
		}
		if !slices.Equal(r.calls, want) {
			t.Fatalf("calls %q, want %q", r.calls, want)
		}
	}
	consume := func(ctx context.Context, b *Batches[int]) chan result {
		out := make(chan result, 1)
		go func() {
			rest, committed, err := b.Consume(ctx)
			out <- result{rest, committed, err}
		}()
		return out
	}

	t.Run("a batch is acknowledged once its commit lands, without waiting for the linger, and before the next is decided", func(t *testing.T) {
		q, r := NewQueue[int](), &recorder{}
		ctx, cancel := context.WithCancel(context.Background())
		b, flights := pipelined(q, r, time.Hour)
		q.Push(1)
		q.Push(2)
		q.Push(3)
		done := consume(ctx, b)
		first := <-flights // [1 2 3], a full batch
		q.Push(4)
		for queued(q) > 0 { // the collect lingers on [4]
			time.Sleep(time.Millisecond)
		}
		land(first, nil) // and stops for this
		land(<-flights, nil)
		stop(t, cancel, done, r, []string{"submit 1 2 3", "before-ack", "ack 1 2 3", "submit 4", "before-ack", "ack 4"})
	})
	t.Run("a commit that failed while the next batch was collected is committed again before that batch is decided", func(t *testing.T) {
		q, r := NewQueue[int](), &recorder{}
		ctx, cancel := context.WithCancel(context.Background())
		b, flights := pipelined(q, r, time.Hour)
		q.Push(1)
		q.Push(2)
		q.Push(3)
		acks := acked(b)
		done := consume(ctx, b)
		first := <-flights
		q.Push(4)
		for queued(q) > 0 { // the collect lingers on [4]
			time.Sleep(time.Millisecond)
		}
		land(first, errors.New("store down"))
		<-acks
		<-acks
		q.Push(5)
		q.Push(6)
		q.Push(7)
		land(<-flights, nil)
		stop(t, cancel, done, r, []string{"submit 1 2 3", "failed", "commit 1 2 3", "before-ack", "ack 1 2 3", "commit 4", "before-ack", "ack 4",
			"submit 5 6 7", "before-ack", "ack 5 6 7"})
	})
	t.Run("a failed commit is committed again, with the batch submitted behind it, in order, before either is acknowledged", func(t *testing.T) {
		q, r := NewQueue[int](), &recorder{}
		ctx, cancel := context.WithCancel(context.Background())
		b, flights := pipelined(q, r, 0)
		for i := 1; i <= 4; i++ {
			q.Push(i)
		}
		done := consume(ctx, b)
		first := <-flights  // [1 2 3]
		second := <-flights // [4]: submitted before the first lands
		land(first, errors.New("store down"))
		land(second, errors.New("aborted: decided on top of the failed batch"))
		q.Push(5) // one: with no linger, a batch is what the queue holds when it is taken
		land(<-flights, nil)
		stop(t, cancel, done, r, []string{"submit 1 2 3", "submit 4", "failed", "failed", "commit 1 2 3", "before-ack", "ack 1 2 3",
			"commit 4", "before-ack", "ack 4", "submit 5", "before-ack", "ack 5"})
	})
	t.Run("a batch submitted behind a failed commit and committed on its own is acknowledged after the failed one is committed again, not decided twice", func(t *testing.T) {
		q, r := NewQueue[int](), &recorder{}
		ctx, cancel := context.WithCancel(context.Background())
		b, flights := pipelined(q, r, 0)
		for i := 1; i <= 4; i++ {
			q.Push(i)
		}
		acks := acked(b)
		done := consume(ctx, b)
		first := <-flights
		land(<-flights, nil) // a shared store commits within Submit
		land(first, errors.New("store down"))
		<-acks
		<-acks
		q.Push(5) // one: with no linger, a batch is what the queue holds when it is taken
		land(<-flights, nil)
		stop(t, cancel, done, r, []string{"submit 1 2 3", "submit 4", "failed", "commit 1 2 3", "before-ack", "ack 1 2 3", "before-ack", "ack 4",
			"submit 5", "before-ack", "ack 5"})
	})
	t.Run("a batch not submitted is committed after the one in flight lands", func(t *testing.T) {
		q, r := NewQueue[int](), &recorder{}
		ctx, cancel := context.WithCancel(context.Background())
		b, flights := pipelined(q, r, 0)
		submit, refused := b.Submit, make(chan struct{})
		b.Submit = func(ctx context.Context, batch []int) *Flight {
			if batch[0] == 4 { // refused at once: Commit retries it
				r.calls = append(r.calls, "refused"+sprint(batch))
				close(refused)
				return nil
			}
			return submit(ctx, batch)
		}
		for i := 1; i <= 4; i++ {
			q.Push(i)
		}
		done := consume(ctx, b)
		first := <-flights
		<-refused // [4], collected while [1 2 3] is in flight
		land(first, nil)
		q.Push(5) // one: with no linger, a batch is what the queue holds when it is taken
		land(<-flights, nil)
		stop(t, cancel, done, r, []string{"submit 1 2 3", "refused 4", "before-ack", "ack 1 2 3", "commit 4", "before-ack", "ack 4",
			"submit 5", "before-ack", "ack 5"})
	})
	t.Run("at shutdown a batch in flight is acknowledged once it lands, or handed to the drain when it failed", func(t *testing.T) {
		for _, failed := range []bool{false, true} {
			q, r := NewQueue[int](), &recorder{}
			ctx, cancel := context.WithCancel(context.Background())
			b, flights := pipelined(q, r, 0)
			for i := 1; i <= 4; i++ {
				q.Push(i)
			}
			done := consume(ctx, b)
			first := <-flights
			second := <-flights
			var err error
			if failed {
				err = errors.New("store down")
			}
			land(second, err)
			cancel()
			land(first, err)
			res := <-done
			want, rest := []string{"submit 1 2 3", "submit 4", "before-ack", "ack 1 2 3", "before-ack", "ack 4"}, []int(nil)
			if failed {
				want, rest = []string{"submit 1 2 3", "submit 4", "failed", "failed"}, []int{1, 2, 3, 4}
			}
			if res.err != nil || !slices.Equal(res.rest, rest) || len(res.committed) != 0 || !slices.Equal(r.calls, want) {
				t.Fatalf("failed %v: Consume = %v, %v, %v, calls %q; want %v in hand, calls %q", failed, res.rest, res.committed, res.err, r.calls, rest, want)
			}
		}
	})
}
