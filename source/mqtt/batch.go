package mqtt

import (
	"context"
	"time"

	"github.com/eclipse/paho.golang/packets"

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
