package jetstream

import (
	"context"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
)

// watch reads the stream's and the consumer's state every StreamCheck
// until ctx is done, starting from the stream's subjects seen at the
// bind, and tells what would otherwise pass unseen:
//   - the stream's own subjects changed: a subject added reaches the
//     consumer (with no filter, or one covering it), and the routes decide
//     its messages, or none does (noteRoutes), and a route the change
//     leaves matching none of them decides nothing (noteIdle);
//   - the stream removed messages before the consumer received them, or
//     the server moved the consumer past messages it never received
//     (account, one check later);
//   - the consumer's max_deliver was set on the server: it is set back to
//     unlimited, as at the bind.
func (c *Consumer) watch(ctx context.Context, nc *nats.Conn, cons jetstream.Consumer, subjects []string) {
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	t := time.NewTicker(c.cfg.StreamCheck)
	defer t.Stop()
	floor := time.NewTicker(floorRead)
	defer floor.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-floor.C:
			c.readFloor(ctx, cons)
			continue
		case <-t.C:
		}
		subjects = c.check(ctx, js, cons, subjects)
	}
}

// floorRead is how often watch reads the consumer's ack floor between
// checks: where a consumer deleted meanwhile is to be created again to
// resume (deleted) lags the acknowledgements by no more, and what it
// delivers again is found duplicate while its keys are in the window.
const floorRead = time.Second

// readFloor reads the consumer's ack floor (noteFloor); a server that
// does not answer, or a consumer gone, is left to the checks and the
// pulls to tell.
func (c *Consumer) readFloor(ctx context.Context, cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(ctx, floorRead)
	defer cancel()
	if info, err := cons.Info(ctx); err == nil {
		c.noteFloor(info)
	}
}

// check is one of watch's readings; it returns the stream's subjects. A
// server that does not answer is asked again at the next one.
func (c *Consumer) check(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, seen []string) []string {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	// The consumer's state first, then the stream's: a purge between the
	// two then shows in the stream's first or deleted sequences, and never
	// only in where the server moved the consumer.
	info, infoErr := cons.Info(ctx)
	st, err := js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return seen
	}
	si := st.CachedInfo()
	if si.Created.Equal(c.streamCreated) { // not one created again since the bind
		c.end.note(si.State.LastSeq, time.Now().UTC())
	}
	if now := si.Config.Subjects; !slices.Equal(now, seen) {
		c.log.Warn("jetstream: the stream's subjects changed while the consumer runs", "stream", c.cfg.Stream,
			"added", diff(seen, now), "removed", diff(now, seen), "subjects", now)
		c.noteRoutes(diff(seen, now), "stream subjects changed")
		c.noteIdle(seen, now, "stream subjects changed")
		seen = now
	}
	if infoErr != nil {
		return seen
	}
	c.noteFloor(info)
	if si.Created.Equal(c.streamCreated) {
		end, _ := c.end.get()
		c.keepMark(ctx, engine.StreamMark{Created: si.Created, Decided: max(info.AckFloor.Stream, c.startFloor), End: end})
	}
	rd := reading{first: si.State.FirstSeq, delivered: info.Delivered.Stream, ackFloor: info.AckFloor.Stream, dseq: info.Delivered.Consumer}
	c.readDeleted(ctx, st, si, &rd)
	if p := c.lastReading; p != nil {
		c.account(*p, rd.dseq >= p.dseq)
	}
	c.lastReading = &rd
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

// removedAhead tells, at the bind, when the stream's first message lies
// past the consumer's ack floor, after: the stream removed messages the
// consumer never acknowledged (a purge, a limit on age, count or size
// with discard old, a stream edit) while no replayguard consumed, and
// nothing will deliver them. A message delivered and never acknowledged
// (to a process that stopped before deciding it, or to a pull request
// that outlived it) and then removed is lost as well. The count is an
// upper bound: some may not be of the consumer's subjects.
func (c *Consumer) removedAhead(first, after uint64) {
	if first <= after+1 || first-1 <= c.accounted {
		return
	}
	from := max(after, c.accounted) + 1
	outside, before := c.owed.cut([]span{{from, first - 1}})
	n := total(outside) + c.owed.tell(total(before))
	c.accounted = first - 1
	if n == 0 { // each one delivered before this bind, and seen acknowledged
		return
	}
	c.log.Error("jetstream: the stream removed messages this consumer never acknowledged (a purge, a max_age, max_msgs or max_bytes limit with discard old, a stream edit): no decision of them was acknowledged, and nothing will deliver them; a decision the audit log holds for one was made before a stop took its acknowledgement",
		"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "from_sequence", from, "through_sequence", first-1, "messages_at_most", n)
	c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: int(n)})
}
