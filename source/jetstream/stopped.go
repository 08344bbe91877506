package jetstream

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
)

// What a stream lost while no Run consumed it is told at the bind from the
// consumer's mark (mark.go): the messages a purge removed past the ack
// floor kept, and those a stream deleted took with it.

// readMark returns the consumer's mark; ok is false when there is none,
// no store keeps marks, or the store cannot tell (logged).
func (c *Consumer) readMark(ctx context.Context) (engine.StreamMark, bool) {
	if c.cfg.Marks == nil {
		return engine.StreamMark{}, false
	}
	m, ok, err := c.cfg.Marks.StreamMark(ctx, c.markName())
	if err != nil {
		c.log.Warn("jetstream: cannot read where the consumer stood when replayguard last ran: what the stream lost meanwhile is not told",
			"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "err", err)
		return engine.StreamMark{}, false
	}
	return m, ok
}

// goneWhileStopped tells, at the bind, the messages of the stream the mark
// names that it had not decided, when that stream is gone: deleted (st is
// nil), or deleted and created again (st another stream). The mark then
// names st, every sequence of the one gone accounted for, so that the
// next start tells nothing again.
func (c *Consumer) goneWhileStopped(ctx context.Context, m engine.StreamMark, found bool, st *jetstream.StreamInfo) {
	if !found || (st != nil && st.Created.Equal(m.Created)) {
		return
	}
	how := "the stream is not found"
	// Stopped: the mark is whole, nothing decided past it (and nothing of
	// a stream created again: none of it was consumed yet).
	next := engine.StreamMark{Created: m.Created, Decided: m.End, End: m.End, Stopped: true}
	if st != nil {
		how = "a stream of that name was created again at " + st.Created.UTC().Format(time.RFC3339) + ", its sequences starting over"
		next = engine.StreamMark{Created: st.Created, End: st.State.LastSeq, Stopped: true}
	}
	if m.End > m.Decided {
		n := m.End - m.Decided
		count, caveat := c.markCount(m)
		c.log.Error("jetstream: the stream was deleted with messages this consumer had not decided, while replayguard was stopped ("+how+"): "+
			"they have no decision and no audit record, and nothing will deliver them; counted from where the consumer stood at "+m.At.Format(time.RFC3339)+
			" (its ack floor, and the stream's last sequence it had seen): messages stored after that are not known and not counted"+caveat,
			"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "from_sequence", m.Decided+1, "through_sequence", m.End, count, n)
		c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: int(n)})
	}
	c.keepMark(ctx, next)
}

// purgedWhileStopped tells, at the bind of an existing consumer, the
// messages the stream removed past the mark's ack floor while no
// replayguard ran (first is the stream's first sequence now, floor the
// consumer's ack floor): a purge moves the ack floor to just before the
// stream's first message, so that the server's state shows nothing.
// Where the ack floor lies below the stream's first message, nothing
// moved it and removedAhead tells the messages from there, exactly.
func (c *Consumer) purgedWhileStopped(m engine.StreamMark, first, floor uint64) {
	if floor+1 < first {
		return
	}
	from := max(m.Decided, c.startFloor, c.accounted) + 1
	if first <= from {
		return
	}
	n := first - from
	count, caveat := c.markCount(m)
	c.log.Error("jetstream: the stream removed messages this consumer had not decided while replayguard was stopped (a purge, which moves the consumer past them, or a limit with discard old): "+
		"they have no decision and no audit record, and nothing will deliver them; counted from the consumer's ack floor kept at "+m.At.Format(time.RFC3339)+caveat,
		"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "from_sequence", from, "through_sequence", first-1, count, n)
	c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: int(n)})
	c.accounted = first - 1
}

// markCount is how a count of stream sequences from m is told: exact
// ("messages") from a mark kept at a stop by a consumer of the whole
// stream, else an upper bound ("messages_at_most"), with the caveat that
// says why: a mark kept while Run ran (it did not stop cleanly) misses
// what was decided after it, and a filter's consumer counts other
// subjects' sequences too.
func (c *Consumer) markCount(m engine.StreamMark) (count, caveat string) {
	if !m.Stopped {
		caveat += "; the mark was kept while replayguard ran, and it did not stop cleanly: a message decided after it is counted too (the audit log holds its decision)"
	}
	if len(c.cfg.Subjects) > 0 {
		caveat += "; some may not be of the consumer's subjects (jetstream.subjects), which the count includes"
	}
	if caveat == "" {
		return "messages", ""
	}
	return "messages_at_most", caveat
}

// startsPast tells, at the bind, the messages of the stream (first to
// last, its first and last sequences) a consumer made elsewhere to start
// past them will never deliver, that this store never decided: those
// after the ack floor where it stood on the stream (stood) up to the
// consumer's start. An operator who made it so, to resume after the
// stream was created again, say, at a sequence of the stream gone, skips
// the new one's first messages: no decision, no audit record.
func (c *Consumer) startsPast(stood engine.StreamMark, first, last uint64) {
	from, through := max(stood.Decided+1, first), min(c.startFloor, last)
	if c.startFloor == 0 || from > through {
		return
	}
	n := through - from + 1
	count, caveat := c.markCount(stood)
	c.log.Error("jetstream: the consumer was made elsewhere to start past messages of the stream this store never decided: it will not deliver them, and they have no decision and no audit record; "+
		fmt.Sprintf("to decide them, delete the consumer and create it from the first, e.g. nats consumer add %s %s --pull --ack explicit --deliver %d (what comes again is found duplicate)", c.cfg.Stream, c.cfg.Consumer, from)+caveat,
		"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "from_sequence", from, "through_sequence", through, count, n)
	c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: int(n)})
}
