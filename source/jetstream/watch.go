package jetstream

import (
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// watch reads the stream's and the consumer's state every StreamCheck
// until ctx is done, starting from the stream's subjects seen at the
// bind, and tells what would otherwise pass unseen:
//   - the stream's own subjects changed: a subject added reaches the
//     consumer (with no filter, or one covering it), and the routes decide
//     its messages, or none does (noteRoutes);
//   - the stream removed messages before the consumer received them
//     (removedAhead);
//   - the consumer's max_deliver was set on the server: it is set back to
//     unlimited, as at the bind.
func (c *Consumer) watch(ctx context.Context, nc *nats.Conn, cons jetstream.Consumer, subjects []string) {
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	t := time.NewTicker(c.cfg.StreamCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		subjects = c.check(ctx, js, cons, subjects)
	}
}

// check is one of watch's readings; it returns the stream's subjects. A
// server that does not answer is asked again at the next one.
func (c *Consumer) check(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, seen []string) []string {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	st, err := js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return seen
	}
	si := st.CachedInfo()
	if now := si.Config.Subjects; !slices.Equal(now, seen) {
		c.log.Warn("jetstream: the stream's subjects changed while the consumer runs", "stream", c.cfg.Stream,
			"added", diff(seen, now), "removed", diff(now, seen), "subjects", now)
		c.noteRoutes(diff(seen, now), "stream subjects changed")
		seen = now
	}
	info, err := cons.Info(ctx) // after the stream's: its delivered sequence is no older
	if err != nil {
		return seen
	}
	c.noteFloor(info)
	c.removedAhead(si.State.FirstSeq, info.Delivered.Stream)
	if n := info.Config.MaxDeliver; n > 0 {
		cc := c.consumerConfig()
		startOf(&cc, info.Config) // a durable made elsewhere to start at a sequence keeps it
		if _, err := st.UpdateConsumer(ctx, cc); err != nil {
			c.log.Error("jetstream: the consumer's max_deliver was set on the server: past it the server gives up on a message, never decided, with no audit record; "+
				"replayguard could not set it back to unlimited, and tries again at the next check: set it with nats consumer edit --max-deliver=-1",
				"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "max_deliver", n, "err", err)
			return seen
		}
		c.log.Warn("jetstream: the consumer's max_deliver was set on the server: past it the server gives up on a message, never decided, with no audit record; replayguard sets it back to unlimited",
			"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "max_deliver", n)
	}
	return seen
}

// removedAhead tells, once per range, when the stream's first message
// lies past the next one the consumer would receive: the stream removed
// messages the consumer never received (a purge, a limit on age, count or
// size with discard old, a stream edit), and nothing will deliver them.
// The count is an upper bound: some may not be of the consumer's subjects.
// At the bind, after is the consumer's ack floor: a message delivered and
// never acknowledged (to a process that stopped before deciding it, or to
// a pull request that outlived it) and then removed is lost as well, and
// no process of this run holds one; while Run consumes, it is the last
// message delivered, so that those in hand are not told. It tells what the
// consumer's position shows, and the server moves that
// past removed messages itself when it looks for the next one to deliver
// (nats-server 2.9: at once on a purge; on a limit, once a pull waits with
// room under max_ack_pending): reliably the removals made while no
// replayguard ran, at the bind, and those ahead of a consumer that
// holds max_ack_pending messages as they happen, at best.
func (c *Consumer) removedAhead(first, after uint64) {
	if first <= after+1 || first-1 <= c.removedThrough {
		return
	}
	from := max(after, c.removedThrough) + 1
	c.log.Error("jetstream: the stream removed messages this consumer never acknowledged (a purge, a max_age, max_msgs or max_bytes limit with discard old, a stream edit): no decision of them was acknowledged, and nothing will deliver them; a decision the audit log holds for one was made before a stop took its acknowledgement",
		"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "from_sequence", from, "through_sequence", first-1, "messages_at_most", first-from)
	c.removedThrough = first - 1
}
