package consume

import (
	"context"
	"log/slog"
	"time"

	"github.com/replayguard/replayguard/source"
)

// Batches is the batching loop of a consumer fed through a Queue (the MQTT
// consumers): collect a batch, commit it, acknowledge it, in that order,
// one batch at a time. Consume and Drain are called from one goroutine,
// one after the other.
type Batches[D any] struct {
	Name   string    // the source's name, first word of its log messages
	Queue  *Queue[D] // where deliveries arrive
	Size   int       // the most deliveries in one batch
	Linger time.Duration
	// Fatal carries an error that ends the loop: a refused subscription.
	Fatal <-chan error
	// Commit commits a batch; an error means ctx is done and nothing was
	// committed.
	Commit func(ctx context.Context, batch []D) error
	// BeforeAck runs between a batch's commit and its acknowledgement (a
	// fault point).
	BeforeAck func()
	// Ack acknowledges a committed batch in receive order.
	Ack      func(batch []D)
	Log      *slog.Logger
	Observer source.Observer
}

// Consume runs the batches: collect, commit, acknowledge, until ctx is
// done or a subscription is refused. It returns the deliveries it holds
// uncommitted at that moment.
func (b *Batches[D]) Consume(ctx context.Context) ([]D, error) {
	for {
		batch, err := b.collect(ctx)
		if ctx.Err() != nil {
			return batch, nil
		}
		if len(batch) > 0 {
			if b.Commit(ctx, batch) != nil {
				return batch, err
			}
			b.BeforeAck()
			b.Ack(batch)
		}
		if err != nil {
			return nil, err
		}
	}
}

// collect waits for a first delivery, then for more until the batch is full
// or Linger has passed. It returns early, possibly with a partial batch,
// when ctx is done or a subscription is refused.
func (b *Batches[D]) collect(ctx context.Context) ([]D, error) {
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
		case <-ctx.Done():
			return batch, nil
		case err := <-b.Fatal:
			b.Log.Error(b.Name+" subscription refused", "err", err)
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
// until ctx is done. What it cannot commit stays unacknowledged: the broker
// sends it again to the next session.
func (b *Batches[D]) Drain(ctx context.Context, rest []D) {
	if len(rest) > 0 {
		b.Log.Info(b.Name+" stopping: committing the deliveries in hand", "messages", len(rest))
	}
	for len(rest) > 0 {
		n := min(len(rest), b.Size)
		if err := b.Commit(ctx, rest[:n]); err != nil {
			b.Log.Error(b.Name+" stopping: deliveries left uncommitted and unacknowledged; the broker will redeliver them",
				"messages", len(rest), "err", err)
			b.Observer.Observe(source.Event{Kind: source.Abandoned, N: len(rest)})
			return
		}
		b.Ack(rest[:n])
		rest = rest[n:]
	}
}
