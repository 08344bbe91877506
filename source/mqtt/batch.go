package mqtt

import (
	"time"

	"github.com/eclipse/paho.golang/packets"
)

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
	c.batches.ReportAcks(len(batch), c.gate.ack(pkts, gens), oldest)
	if len(batch) > 0 {
		c.share.Settled(batch[len(batch)-1].n, time.Now())
	}
}
