package jetstream

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
)

// What a stream loses while no replayguard consumes it leaves no trace on
// the server: a purge moves the durable consumer's ack floor past the
// messages it removed at once, and a stream deleted takes its consumer
// with it. So the consumer keeps a mark in the store (Config.Marks): the
// stream's creation time, its ack floor and the stream's end as last
// seen, at the bind, at each check and at the stop. The next bind
// tells from it what the stream lost meanwhile (stopped.go).

// markName is the name the consumer's mark is kept under.
func (c *Consumer) markName() string { return c.cfg.Stream + "/" + c.cfg.Consumer }

// keepMark keeps m as the consumer's mark; a store that refuses it is
// logged, and the mark before stays.
func (c *Consumer) keepMark(ctx context.Context, m engine.StreamMark) {
	if c.cfg.Marks == nil {
		return
	}
	m.At = time.Now().UTC()
	if err := c.cfg.Marks.SetStreamMark(ctx, c.markName(), m); err != nil {
		c.log.Warn("jetstream: cannot keep where the consumer stands in the store: what the stream loses while replayguard is stopped may not be told",
			"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "err", err)
	}
}

// markStop keeps, as Run stops, where the consumer stands (Stopped): its
// ack floor once the acks have reached the server, or, when the stream
// went while Run consumed it, every sequence of it accounted for
// (tellGone told them). It waits at most markStopTimeout for the
// server's answer, whatever the shutdown left of its bound: without it,
// the mark of the last check stays, not Stopped.
func (c *Consumer) markStop(ctx context.Context, cons jetstream.Consumer) {
	if c.cfg.Marks == nil {
		return
	}
	end, _ := c.end.get()
	if c.streamWent.Load() != nil {
		c.keepMark(ctx, engine.StreamMark{Created: c.streamCreated, Decided: end, End: end, Stopped: true})
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markStopTimeout)
	defer cancel()
	info, err := cons.Info(ctx)
	if err != nil {
		return
	}
	c.keepMark(ctx, engine.StreamMark{Created: c.streamCreated, Decided: max(info.AckFloor.Stream, c.startFloor), End: end, Stopped: true})
}

// markStopTimeout bounds markStop's request of the consumer's ack floor.
const markStopTimeout = time.Second
