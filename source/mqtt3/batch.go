package mqtt3

import (
	"context"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// commit passes the batch to Process until it returns nil. It gives up
// only when ctx is done, with nothing committed.
func (c *Consumer) commit(ctx context.Context, batch []delivery) error {
	msgs := make([]engine.Message, len(batch))
	for i := range batch {
		msgs[i] = batch[i].msg
	}
	return c.commits.Commit(ctx, msgs, nil)
}

// ack acknowledges a committed batch in receive order, each delivery
// through paho's Message.Ack on the connection that received it. A
// delivery of an earlier connection is skipped: its packet id named a
// message of that connection's session only, and the broker sends it
// again. paho drops such an Ack too (it is bound to the router of the
// connection that delivered the message), but the check here keeps the
// count honest and does not rely on it. A connection that drops during
// the loop may still lose a few of the Acks counted here; the broker
// sends those again and they are found duplicate.
func (c *Consumer) ack(batch []delivery) {
	var (
		acked  int
		oldest time.Time
	)
	if bc := c.conn.Load(); bc != nil {
		bc.cork()
		defer bc.uncork()
	}
	for i := range batch {
		d := &batch[i]
		if d.gen == 0 || d.gen != c.cur.Load() {
			continue
		}
		if acked == 0 {
			oldest = d.at
		}
		d.m.Ack()
		acked++
	}
	if acked > 0 {
		c.obs.Observe(Event{Kind: Acked, N: acked, Lag: time.Since(oldest)})
	}
	if dropped := len(batch) - acked; dropped > 0 {
		c.log.Info("mqtt connection dropped before acknowledgement; the broker will redeliver", "messages", dropped)
		c.obs.Observe(Event{Kind: AckDropped, N: dropped})
	}
}
