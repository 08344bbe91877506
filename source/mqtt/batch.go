package mqtt

import (
	"context"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// consume runs the batches: collect, commit, acknowledge, until ctx is done
// or a subscription is refused. It returns the deliveries it holds
// uncommitted at that moment.
func (c *Consumer) consume(ctx context.Context) ([]delivery, error) {
	for {
		batch, err := c.collect(ctx)
		if ctx.Err() != nil {
			return batch, nil
		}
		if len(batch) > 0 {
			if c.commit(ctx, batch) != nil {
				return batch, err
			}
			consume.BeforeAck()
			c.ack(batch)
		}
		if err != nil {
			return nil, err
		}
	}
}

// collect waits for a first delivery, then for more until the batch is full
// or BatchLinger has passed. It returns early, possibly with a partial
// batch, when ctx is done or a subscription is refused.
func (c *Consumer) collect(ctx context.Context) ([]delivery, error) {
	var (
		batch  = make([]delivery, 0, c.cfg.BatchSize)
		linger <-chan time.Time
	)
	for {
		batch = c.q.Take(batch, c.cfg.BatchSize-len(batch))
		if len(batch) == c.cfg.BatchSize {
			return batch, nil
		}
		if len(batch) > 0 && linger == nil {
			if c.cfg.BatchLinger <= 0 {
				return batch, nil
			}
			t := time.NewTimer(c.cfg.BatchLinger)
			defer t.Stop()
			linger = t.C
		}
		select {
		case <-c.q.Ready():
		case <-linger:
			return c.q.Take(batch, c.cfg.BatchSize-len(batch)), nil
		case <-ctx.Done():
			return batch, nil
		case err := <-c.fatal:
			c.log.Error("mqtt subscription refused", "err", err)
			return batch, err
		}
	}
}

// commit passes the batch to Process until it returns nil. It gives up
// only when ctx is done, with nothing committed.
func (c *Consumer) commit(ctx context.Context, batch []delivery) error {
	msgs := make([]engine.Message, len(batch))
	for i := range batch {
		msgs[i] = batch[i].msg
	}
	return c.commits.Commit(ctx, msgs, nil)
}

// ack acknowledges a committed batch in receive order. Deliveries whose
// connection has dropped are skipped: their packet ids belong to a session
// state a new connection reuses, and the broker sends them again anyway.
func (c *Consumer) ack(batch []delivery) {
	pkts := make([]*packets.Publish, len(batch))
	gens := make([]uint64, len(batch))
	var oldest time.Time
	for i := range batch {
		pkts[i], gens[i] = batch[i].pkt, batch[i].gen
		if oldest.IsZero() && !batch[i].dead() {
			oldest = batch[i].at
		}
	}
	acked := c.gate.ack(pkts, gens)
	if acked > 0 {
		c.obs.Observe(Event{Kind: Acked, N: acked, Lag: time.Since(oldest)})
	}
	if dropped := len(batch) - acked; dropped > 0 {
		c.log.Info("mqtt connection dropped before acknowledgement; the broker will redeliver", "messages", dropped)
		c.obs.Observe(Event{Kind: AckDropped, N: dropped})
	}
}

// drain commits and acknowledges what is left at shutdown, in batches,
// until ctx is done. What it cannot commit stays unacknowledged: the broker
// sends it again to the next session.
func (c *Consumer) drain(ctx context.Context, rest []delivery) {
	if len(rest) > 0 {
		c.log.Info("mqtt stopping: committing the deliveries in hand", "messages", len(rest))
	}
	for len(rest) > 0 {
		n := min(len(rest), c.cfg.BatchSize)
		if err := c.commit(ctx, rest[:n]); err != nil {
			c.log.Error("mqtt stopping: deliveries left uncommitted and unacknowledged; the broker will redeliver them",
				"messages", len(rest), "err", err)
			c.obs.Observe(Event{Kind: Abandoned, N: len(rest)})
			return
		}
		c.ack(rest[:n])
		rest = rest[n:]
	}
}
