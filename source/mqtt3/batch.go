package mqtt3

import (
	"time"
)

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
	if cc := c.conn.Load(); cc != nil {
		cc.cork()
		defer cc.uncork()
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
	c.batches.ReportAcks(len(batch), acked, oldest)
	if len(batch) > 0 {
		c.share.Settled(batch[len(batch)-1].n, time.Now())
	}
}
