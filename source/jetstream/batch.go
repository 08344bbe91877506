package jetstream

import (
	"context"
	"errors"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// errPullEnded: the pull subscription closed by itself.
var errPullEnded = errors.New("jetstream: the pull subscription ended")

// consume runs the batches (consume.Loop): collect, commit, ack, until ctx
// is done or the consumer is lost, the next batch collected and decided
// while one commits. It returns the messages it holds uncommitted then, and
// those committed behind them (consume.Loop.Run), for drain.
func (c *Consumer) consume(ctx context.Context, in <-chan delivery, fatal <-chan error) (inHand, committed []delivery, err error) {
	l := consume.Loop[delivery]{Size: c.cfg.BatchSize,
		Collect: func(ctx context.Context, landed <-chan struct{}) ([]delivery, error) {
			batch, err := c.collect(ctx, in, fatal, landed)
			c.noteRedeliveries(batch)
			return batch, err
		},
		Commit: c.commit, Submit: consume.SubmitMessages(c.commits, (*delivery).message), Land: c.commits.Land,
		BeforeAck: consume.BeforeAck, Ack: c.ack}
	inHand, committed, err = l.Run(ctx)
	if err != nil {
		c.log.Error("jetstream consumer lost", "err", err)
	}
	return inHand, committed, err
}

// collect waits for a first message, then for more until the batch is full
// or BatchLinger has passed. It returns early, possibly with a partial
// batch, when ctx is done, the pull ends, or landed is closed.
func (c *Consumer) collect(ctx context.Context, in <-chan delivery, fatal <-chan error, landed <-chan struct{}) ([]delivery, error) {
	batch := make([]delivery, 0, c.cfg.BatchSize)
	var linger <-chan time.Time
	for {
		select {
		case d, ok := <-in:
			if !ok {
				return batch, pullEnded(fatal)
			}
			batch = append(batch, d)
			if len(batch) == c.cfg.BatchSize {
				return batch, nil
			}
			if linger == nil {
				if c.cfg.BatchLinger <= 0 {
					return c.takeReady(batch, in), nil
				}
				t := time.NewTimer(c.cfg.BatchLinger)
				defer t.Stop()
				linger = t.C
			}
		case <-linger:
			return c.takeReady(batch, in), nil
		case <-landed:
			return c.takeReady(batch, in), nil
		case <-ctx.Done():
			return batch, nil
		case err := <-fatal:
			return batch, err
		}
	}
}

// pullEnded is why in was closed: the error receive sent to fatal before
// it closed in (a deleted consumer), else errPullEnded.
func pullEnded(fatal <-chan error) error {
	select {
	case err := <-fatal:
		return err
	default:
		return errPullEnded
	}
}

// takeReady adds what in holds now, without waiting, up to BatchSize.
func (c *Consumer) takeReady(batch []delivery, in <-chan delivery) []delivery {
	for len(batch) < c.cfg.BatchSize {
		select {
		case d, ok := <-in:
			if !ok {
				return batch
			}
			batch = append(batch, d)
		default:
			return batch
		}
	}
	return batch
}

// commit passes the batch to Process until it returns nil; it gives up
// only when ctx is done. Meanwhile the server hears that the batch is in
// progress (holding), however long the attempts and the waits between them.
func (c *Consumer) commit(ctx context.Context, batch []delivery) error {
	return consume.CommitMessages(c.commits, (*delivery).message)(ctx, batch)
}

// message is d's engine message.
func (d *delivery) message() *engine.Message { return &d.msg }

// noteRedeliveries logs the batch's messages that the server delivered
// before: the engine decides them like any other (a copy of a committed one
// is a duplicate), and their audit records carry dup.
func (c *Consumer) noteRedeliveries(batch []delivery) {
	n, first, most := 0, -1, uint64(0)
	for i := range batch {
		if batch[i].delivered > 1 {
			n++
			most = max(most, batch[i].delivered)
			if first < 0 {
				first = i
			}
		}
	}
	if n == 0 {
		return
	}
	c.log.Info("jetstream redelivered messages in the batch: recorded as dup, decided like any other",
		"messages", n, "first_stream_seq", batch[first].streamSeq, "max_num_delivered", most)
	c.obs.Observe(source.Event{Kind: source.Redelivered, N: n})
}

// ack acknowledges a committed batch in delivery order. An ack is one
// publish on the connection, in order with the others; nats.go buffers it
// while reconnecting. One that cannot be sent (connection closed) leaves
// the message to be delivered again after AckWait, found duplicate.
func (c *Consumer) ack(batch []delivery) {
	acked, dropped := 0, 0
	var lastErr error
	c.holding.release(batch)
	for i := range batch {
		if err := batch[i].js.Ack(); err != nil {
			dropped++
			lastErr = err
			continue
		}
		acked++
	}
	if acked > 0 {
		c.obs.Observe(source.Event{Kind: source.Acked, N: acked, Lag: time.Since(batch[0].at)})
	}
	if dropped > 0 {
		c.log.Warn("jetstream acks not sent; the server will deliver those messages again", "messages", dropped, "err", lastErr)
		c.obs.Observe(source.Event{Kind: source.AckDropped, N: dropped})
	}
}

// drain commits and acknowledges the messages in hand at shutdown (rest,
// then committed, committed already: only acknowledged, once rest is),
// then those still coming through in, in batches, until in closes or ctx
// is done. It returns what it could not commit; committed is acknowledged
// then all the same (the server takes acknowledgements in any order), so
// that it is neither delivered again after AckWait nor left uncounted.
func (c *Consumer) drain(ctx context.Context, rest, committed []delivery, in <-chan delivery) []delivery {
	if len(rest) > 0 {
		c.log.Info("jetstream stopping: committing the messages in hand", "messages", len(rest))
	}
	for {
		if len(rest) == 0 && len(committed) > 0 {
			c.ack(committed)
			committed = nil
		}
		if len(committed) == 0 { // nothing after committed joins a batch before it is acknowledged
			taken := len(rest)
			rest = c.takeReady(rest, in)
			c.noteRedeliveries(rest[taken:])
		}
		if len(rest) == 0 {
			select {
			case d, ok := <-in:
				if !ok {
					return nil
				}
				rest = append(rest, d)
				c.noteRedeliveries(rest)
				continue
			case <-ctx.Done():
				return nil
			}
		}
		n := min(len(rest), c.cfg.BatchSize)
		if err := c.commit(ctx, rest[:n]); err != nil {
			if len(committed) > 0 {
				c.ack(committed)
			}
			return rest
		}
		c.ack(rest[:n])
		rest = rest[n:]
	}
}

// abandon negatively acknowledges what shutdown could not commit, so that
// the server delivers it again at once to the next start rather than after
// AckWait.
func (c *Consumer) abandon(left []delivery) {
	if len(left) == 0 {
		return
	}
	c.log.Error("jetstream stopping: messages left uncommitted and unacknowledged; the server will deliver them again",
		"messages", len(left))
	c.holding.release(left)
	for i := range left {
		_ = left[i].js.Nak()
	}
	c.tellTakenLeft(takenSeqs(left))
	// A part of their batch committed some (engine.Message.Decided): those
	// are decided, only their acknowledgement is left undone.
	decided := consume.Decided(left, (*delivery).message)
	if decided > 0 {
		c.obs.Observe(source.Event{Kind: source.AckDropped, N: decided})
	}
	if n := len(left) - decided; n > 0 {
		c.obs.Observe(source.Event{Kind: source.Abandoned, N: n})
	}
}
