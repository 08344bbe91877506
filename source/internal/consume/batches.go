package consume

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
)

// Batches is the batching loop of a consumer fed through a Queue (the MQTT
// consumers): collect a batch, commit it, acknowledge it, in that order.
// With Submit, the next batch is collected and decided while one commits;
// acknowledgements stay in receive order, each after its batch's commit.
// Consume and Drain are called from one goroutine, one after the other.
type Batches[D any] struct {
	Name   string    // the source's name, first word of its log messages
	Queue  *Queue[D] // where deliveries arrive
	Size   int       // the most deliveries in one batch
	Linger time.Duration
	// Fatal carries an error that ends the loop: a refused subscription.
	Fatal <-chan error
	// FatalQuiet leaves an error from Fatal unlogged: the caller reports
	// it (an adoption's end). Default false: logged as a refused
	// subscription.
	FatalQuiet bool
	// Commit commits a batch; an error means ctx is done and nothing was
	// committed.
	Commit func(ctx context.Context, batch []D) error
	// Submit, when set, decides a batch and queues its commit (see
	// Committer.Submit); nil means the batch is to go to Commit.
	Submit func(ctx context.Context, batch []D) *Flight
	// Land waits for a submitted batch's commit (Committer.Land).
	Land func(f *Flight) error
	// BeforeAck runs between a batch's commit, landed at the time it is
	// given, and its acknowledgement (a fault point).
	BeforeAck func(committed time.Time)
	// Ack acknowledges a committed batch in receive order.
	Ack func(batch []D)
	// Msg, when set, points at a delivery's engine message: a delivery
	// left at a stop whose decision a part of its batch committed
	// (engine.Message.Decided) is counted AckDropped, not Abandoned.
	Msg      func(*D) *engine.Message
	Log      *slog.Logger
	Observer source.Observer
}

// Consume runs the batches: collect, commit, acknowledge, until ctx is
// done or a subscription is refused. It returns the deliveries it holds
// uncommitted at that moment, and those committed behind them (Loop.Run),
// for Drain.
func (b *Batches[D]) Consume(ctx context.Context) (rest, committed []D, err error) {
	l := Loop[D]{Size: b.Size, Collect: b.collect, Commit: b.Commit, Submit: b.Submit, Land: b.Land,
		BeforeAck: b.BeforeAck, Ack: b.Ack}
	return l.Run(ctx)
}

// Loop is a consumer's batch loop: collect a batch, commit it, acknowledge
// it, in that order.
//
// A broker sends no more than its in-flight window before the consumer
// acknowledges some: committing one batch at a time, the window lies idle
// while each commit is written. With Submit, a batch is submitted and the
// next one collected and decided while it commits; collecting stops as
// soon as the commit has landed, so that its acknowledgements are not kept
// waiting. Acknowledgements stay in delivery order, each after its batch's
// commit.
type Loop[D any] struct {
	Size int // the most deliveries in one batch
	// Collect returns the next batch. It returns early, possibly with a
	// partial batch, when ctx is done, on an error that ends the loop, or
	// when landed is closed.
	Collect func(ctx context.Context, landed <-chan struct{}) ([]D, error)
	// Commit commits a batch, retrying; an error means ctx is done and
	// nothing was committed.
	Commit func(ctx context.Context, batch []D) error
	// Submit, when set, decides a batch and queues its commit (see
	// Committer.Submit); a nil Flight means the batch is to go to Commit.
	Submit func(ctx context.Context, batch []D) *Flight
	// Land waits for a submitted batch's commit (Committer.Land).
	Land func(f *Flight) error
	// BeforeAck runs between a batch's commit, landed at the time it is
	// given, and its acknowledgement.
	BeforeAck func(committed time.Time)
	// Ack acknowledges a committed batch in delivery order.
	Ack func(batch []D)
}

// flight is a batch whose commit was submitted.
type flight[D any] struct {
	batch []D
	f     *Flight
}

// Run runs the batches until ctx is done or Collect returns an error. It
// returns the deliveries it holds uncommitted at that moment; those
// committed behind them, to be acknowledged once they are, and never
// committed again (they would be decided twice); and that error.
func (l *Loop[D]) Run(ctx context.Context) ([]D, []D, error) {
	var fl *flight[D] // committing while the next batch is collected
	for {
		var landed <-chan struct{}
		if fl != nil {
			landed = fl.f.Landed()
		}
		batch, err := l.Collect(ctx, landed)
		var s settled[D]
		stopping := ctx.Err() != nil // read once: a stop between two reads would leave fl in flight
		if fl != nil && (stopping || fl.f.done()) {
			// Landed while the batch was collected: settled first, so
			// that a failure is known before the next batch is decided.
			s, fl = l.land(fl, nil), nil
		}
		if stopping {
			return append(s.again, batch...), nil, nil
		}
		var next *flight[D]
		if len(batch) > 0 && len(s.again) == 0 && l.Submit != nil {
			if f := l.Submit(ctx, batch); f != nil {
				next = &flight[D]{batch: batch, f: f}
			}
		}
		submitted := next != nil
		if fl != nil {
			s = l.land(fl, next)
		} else {
			s.next = next
		}
		if len(batch) > 0 && !submitted {
			s.again = append(s.again, batch...)
		}
		if rest := l.commit(ctx, s.again); rest != nil {
			// after is committed but waits behind rest: handed back apart,
			// so that the drain acknowledges it once rest is, in order,
			// never left unacknowledged while the deliveries after it are.
			return rest, s.after, err
		}
		if s.after != nil {
			l.BeforeAck(s.afterAt)
			l.Ack(s.after)
		}
		fl = s.next
		if err != nil && fl != nil {
			s := l.land(fl, nil)
			return l.commit(ctx, s.again), nil, err
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

// settled is what land leaves to do, in order: commit again, then
// acknowledge after; and the batch still in flight.
type settled[D any] struct {
	again   []D       // to be committed again, in order
	after   []D       // committed, to be acknowledged once again is
	afterAt time.Time // when after's commit landed
	next    *flight[D]
}

// land waits for fl's commit and acknowledges its batch. When the commit
// failed, its batch is to be committed again, and next, submitted behind
// it, is waited for as well: it fails too, decided on top of the failed
// one, and is committed again after it; or it was decided on its own (a
// shared store commits within Submit) and committed, and is acknowledged
// after the failed one is committed. Else next stays in flight.
func (l *Loop[D]) land(fl, next *flight[D]) settled[D] {
	if l.Land(fl.f) == nil {
		l.BeforeAck(fl.f.At())
		l.Ack(fl.batch)
		return settled[D]{next: next}
	}
	s := settled[D]{again: fl.batch}
	if next != nil {
		if l.Land(next.f) == nil {
			s.after, s.afterAt = next.batch, next.f.At()
		} else {
			s.again = slices.Concat(s.again, next.batch)
		}
	}
	return s
}

// commit commits and acknowledges batches of rest in order, at most Size
// deliveries each. It returns what it could not commit: ctx is done.
func (l *Loop[D]) commit(ctx context.Context, rest []D) []D {
	for len(rest) > 0 {
		n := min(len(rest), l.Size)
		if l.Commit(ctx, rest[:n]) != nil {
			return rest
		}
		l.BeforeAck(time.Now())
		l.Ack(rest[:n])
		rest = rest[n:]
	}
	return nil
}

// collect waits for a first delivery, then for more until the batch is full
// or Linger has passed. It returns early, possibly with a partial batch,
// when ctx is done, a subscription is refused, or landed is closed.
func (b *Batches[D]) collect(ctx context.Context, landed <-chan struct{}) ([]D, error) {
	var (
		batch  = make([]D, 0, b.Size)
		linger <-chan time.Time
	)
	for {
		batch = b.Queue.Take(batch, b.Size-len(batch))
		if len(batch) == b.Size {
			return batch, nil
		}
		if len(batch) > 0 && linger == nil {
			if b.Linger <= 0 {
				return batch, nil
			}
			t := time.NewTimer(b.Linger)
			defer t.Stop()
			linger = t.C
		}
		select {
		case <-b.Queue.Ready():
		case <-linger:
			return b.Queue.Take(batch, b.Size-len(batch)), nil
		case <-landed:
			return batch, nil
		case <-ctx.Done():
			return batch, nil
		case err := <-b.Fatal:
			if !b.FatalQuiet {
				b.Log.Error(b.Name+" subscription refused", "err", err)
			}
			return batch, err
		}
	}
}

// ReportAcks reports a committed batch of n deliveries, acked of which
// were acknowledged, the oldest of those received at oldest: the others'
// connection dropped first, and the broker sends them again.
func (b *Batches[D]) ReportAcks(n, acked int, oldest time.Time) {
	if acked > 0 {
		b.Observer.Observe(source.Event{Kind: source.Acked, N: acked, Lag: time.Since(oldest)})
	}
	if dropped := n - acked; dropped > 0 {
		b.Log.Info(b.Name+" connection dropped before acknowledgement; the broker will redeliver", "messages", dropped)
		b.Observer.Observe(source.Event{Kind: source.AckDropped, N: dropped})
	}
}

// Drain commits and acknowledges what is left at shutdown, in batches,
// until ctx is done: rest and committed, as Consume returned them, then
// more. committed is only acknowledged, once rest is. What it cannot
// commit stays unacknowledged: the broker sends it again to the next
// session, and committed with it (acknowledgements go in receive order),
// found duplicate then and counted AckDropped now.
func (b *Batches[D]) Drain(ctx context.Context, rest, committed, more []D) {
	if len(committed) == 0 {
		rest, more = append(rest, more...), nil
	}
	if n := len(rest) + len(more); n > 0 {
		b.Log.Info(b.Name+" stopping: committing the deliveries in hand", "messages", n)
	}
	left, err := b.drain(ctx, rest)
	if left == nil {
		if len(committed) > 0 {
			b.Ack(committed)
		}
		left, err = b.drain(ctx, more)
	} else {
		left = append(left, more...)
		if len(committed) > 0 {
			b.Log.Info(b.Name+" stopping: committed deliveries left unacknowledged behind those that could not be committed; the broker will redeliver them",
				"messages", len(committed))
			b.Observer.Observe(source.Event{Kind: source.AckDropped, N: len(committed)})
		}
	}
	decided := Decided(left, b.Msg)
	if decided > 0 { // a part of their batch committed them: decided, not abandoned
		b.Log.Info(b.Name+" stopping: deliveries a part of their batch committed left unacknowledged; the broker will redeliver them",
			"messages", decided)
		b.Observer.Observe(source.Event{Kind: source.AckDropped, N: decided})
	}
	if n := len(left) - decided; n > 0 {
		b.Log.Error(b.Name+" stopping: deliveries left uncommitted and unacknowledged; the broker will redeliver them",
			"messages", n, "err", err)
		b.Observer.Observe(source.Event{Kind: source.Abandoned, N: n})
	}
}

// drain commits and acknowledges rest in batches, until ctx is done. It
// returns what it could not commit, and why.
func (b *Batches[D]) drain(ctx context.Context, rest []D) ([]D, error) {
	for len(rest) > 0 {
		n := min(len(rest), b.Size)
		if err := b.Commit(ctx, rest[:n]); err != nil {
			return rest, err
		}
		b.Ack(rest[:n])
		rest = rest[n:]
	}
	return nil, nil
}
