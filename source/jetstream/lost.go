package jetstream

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/source"
)

// maxListed is the most deleted sequences a check asks the server to
// list: past it, the messages never received above the stream's first are
// told without saying which the stream removed.
const maxListed = 1 << 16

// reading is what one check read of the stream and the consumer.
type reading struct {
	first     uint64   // the stream's first sequence
	deleted   []uint64 // the stream's deleted sequences (a purge with a subject, a message deleted, a per-subject limit), in order
	listed    bool     // deleted holds every one of them
	delivered uint64   // the consumer's delivered stream sequence: where the server moved it
	ackFloor  uint64   // its ack floor, a stream sequence
	dseq      uint64   // the deliveries it made: its delivered consumer sequence
}

// readDeleted reads the stream's deleted sequences into rd, when the consumer
// takes all of the stream (else they could not be told from the others')
// and there are some, but not too many, to list.
func (c *Consumer) readDeleted(ctx context.Context, st jetstream.Stream, si *jetstream.StreamInfo, rd *reading) {
	n := si.State.NumDeleted
	if n == 0 {
		rd.listed = true
		return
	}
	if len(c.cfg.Subjects) > 0 || n > maxListed {
		return
	}
	full, err := st.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil || full.State.NumDeleted != len(full.State.Deleted) {
		return
	}
	rd.deleted = slices.Sorted(slices.Values(full.State.Deleted))
	rd.listed = true
}

// account tells, once, the stream sequences the consumer never received
// and never will, as a reading taken one check before shows them: by
// now, every message the server had delivered when it was taken has
// come, or went elsewhere (another member of a group, a lost connection).
//
// When every delivery up to that reading came here and the consumer takes
// all of the stream, it knows exactly which stream sequences it passed
// over: those the stream removed (a purge, a limit, a message deleted)
// before the server delivered them, and, past the ack floor the server
// moved, those it still holds, which the server will never deliver (a
// purge with a subject moves nats-server 2.9's consumer to the purged
// subject's first message left, past every other subject's too). Else it
// can tell only the messages the stream removed from its start beyond
// what it received: an upper bound where a filter takes part of the
// stream, and one that may hold what another member received. So it is
// too when the server's count of deliveries went back since (steady is
// false: a server restarted from older state, which delivers again from
// there).
func (c *Consumer) account(rd reading, steady bool) {
	all := steady && c.receipts.complete(c.verified, rd.dseq)
	c.verified = rd.dseq
	if !steady {
		c.receipts.rewound()
		c.verified = 0
	}
	if all && len(c.cfg.Subjects) == 0 && c.exact(rd) {
		return
	}
	c.front(rd, all)
	c.accounted = max(c.accounted, rd.delivered)
	c.receipts.forget(c.accounted)
}

// exact tells the stream sequences never received up to where the server
// moved the consumer and acknowledged, or up to the stream's first; false
// when the receipts no longer tell them.
func (c *Consumer) exact(rd reading) bool {
	through := max(min(rd.delivered, rd.ackFloor), preceding(rd.first))
	if through <= c.accounted {
		return true
	}
	runs, ok := c.receipts.unreceived(c.accounted, through)
	if !ok {
		return false
	}
	runs, before := c.owed.cut(runs)
	c.tellOwed(before)
	var removed, held, either []span
	for _, r := range runs {
		for _, p := range split(r, rd) {
			switch {
			case p.from < rd.first || (rd.listed && isDeleted(p.from, rd.deleted)):
				removed = append(removed, p)
			case rd.listed:
				held = append(held, p)
			default:
				either = append(either, p)
			}
		}
	}
	c.tellLost(removed, "jetstream: the stream removed messages this consumer never received (a purge, a message deleted, a max_age, max_msgs, max_bytes or per-subject limit with discard old): no decision of them was made, and nothing will deliver them")
	c.tellLost(held, "jetstream: the server moved this consumer past messages the stream still holds, which it never received (nats-server 2.9 does so on a purge with a subject, past every other subject's messages up to the purged subject's first one left): no decision of them was made, and the consumer will not deliver them; "+
		"take them from the stream by their sequences (nats stream get), or with a consumer of their own")
	c.tellLost(either, "jetstream: the server moved this consumer past messages it never received, which the stream removed or still holds (too many sequences deleted to list): no decision of them was made, and the consumer will not deliver them")
	c.accounted = through
	c.receipts.forget(through)
	return true
}

// front tells the messages the stream removed from its start beyond the
// last one received before it: all of them when the consumer took all
// of the stream and every delivery came here, else at most those.
func (c *Consumer) front(rd reading, all bool) {
	lo := c.accounted
	if below, ok := c.receipts.below(rd.first); ok {
		lo = max(lo, below)
	} else {
		lo = max(lo, preceding(rd.first)) // what the receipts lost, it cannot tell
	}
	if rd.first <= lo+1 {
		return
	}
	outside, before := c.owed.cut([]span{{lo + 1, rd.first - 1}})
	n := total(outside) + c.owed.tell(total(before))
	if n == 0 { // each one the server had delivered before this bind, and seen acknowledged
		c.accounted = rd.first - 1
		return
	}
	msg := "jetstream: the stream removed messages this consumer never received (a purge, a max_age, max_msgs, max_bytes or per-subject limit with discard old): no decision of them was made, and nothing will deliver them"
	if len(c.cfg.Subjects) > 0 {
		msg += "; some may not be of the consumer's subjects (jetstream.subjects), which the count includes"
	}
	if !all {
		msg += "; the server also delivered messages that did not come here (to another member of the group, or to a connection lost), and some of these may be among them, decided there"
	}
	c.tellAtMost(span{lo + 1, rd.first - 1}, n, msg)
	c.accounted = rd.first - 1
}

// split cuts r where rd's deleted sequences start and end runs, so that
// each part is wholly removed or wholly held.
func split(r span, rd reading) []span {
	var out []span
	if r.from < rd.first {
		out = append(out, span{r.from, min(r.through, preceding(rd.first))})
		if r.through < rd.first {
			return out
		}
		r.from = rd.first
	}
	if !rd.listed {
		return append(out, r)
	}
	i, _ := slices.BinarySearch(rd.deleted, r.from)
	for seq := r.from; seq <= r.through; {
		end := r.through
		if i < len(rd.deleted) && rd.deleted[i] == seq { // a run of deleted sequences
			for end = seq; i+1 < len(rd.deleted) && rd.deleted[i+1] == end+1 && end < r.through; i++ {
				end++
			}
			i++
		} else if i < len(rd.deleted) && rd.deleted[i] <= r.through {
			end = rd.deleted[i] - 1
		}
		out = append(out, span{seq, end})
		seq = end + 1
	}
	return out
}

// startBefore is the stream sequence before the consumer's own start, as
// far as the server tells it: a durable made elsewhere to deliver from a
// sequence, a time, the new or the last messages was never to deliver
// what lies before, which is no loss. The start sequence is in the
// configuration; for the other policies, the server sets the delivered
// stream sequence to the one before the first it is to deliver, and
// keeps it there until a delivery. A purge moves it too, but only to
// before the stream's first sequence (first): there, what lay before it
// may have been removed after the start, and 0 keeps it told. Once the
// consumer delivered, the start is no longer read (the ack floor bounds
// what was decided).
func startBefore(info *jetstream.ConsumerInfo, first uint64) uint64 {
	switch info.Config.DeliverPolicy {
	case jetstream.DeliverAllPolicy:
		return 0
	case jetstream.DeliverByStartSequencePolicy:
		return preceding(info.Config.OptStartSeq)
	}
	if info.Delivered.Consumer == 0 && info.Delivered.Stream > preceding(first) {
		return info.Delivered.Stream
	}
	return 0
}

// preceding is the stream sequence before first, the stream's first
// sequence (0 for a stream that never held a message).
func preceding(first uint64) uint64 { return max(first, 1) - 1 }

func isDeleted(seq uint64, deleted []uint64) bool {
	_, found := slices.BinarySearch(deleted, seq)
	return found
}

// tellLost logs runs, when there are any, with msg, and counts them.
func (c *Consumer) tellLost(runs []span, msg string) {
	if len(runs) == 0 {
		return
	}
	var n uint64
	for _, r := range runs {
		n += r.len()
	}
	c.log.Error(c.earlier(msg, runs[0]), "stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "from_sequence", runs[0].from,
		"through_sequence", runs[len(runs)-1].through, "messages", n, "sequences", runsText(runs))
	c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: int(n)})
}

// tellAtMost logs r with msg, as at most n of its messages, and counts
// that.
func (c *Consumer) tellAtMost(r span, n uint64, msg string) {
	c.log.Error(c.earlier(msg, r), "stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "from_sequence", r.from,
		"through_sequence", r.through, "messages_at_most", n)
	c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: int(n)})
}

// tellOwed tells, of runs, the stream sequences the server had delivered
// before this bind (owed) and this one never received since, those that
// can have been left undecided: at most as many as were ack pending at
// the bind and not delivered here again, or passed over. The others were
// acknowledged before this start, so decided, and are not told.
func (c *Consumer) tellOwed(runs []span) {
	if len(runs) == 0 {
		return
	}
	k := c.owed.tell(total(runs))
	if k == 0 {
		return
	}
	c.log.Error(c.earlier("jetstream: the stream removed, or the server moved this consumer past, messages it had delivered before this start and held unacknowledged (ack pending at the bind), before delivering them again, or that it passed over: "+
		"no decision of them was acknowledged, and nothing will deliver them; the server does not tell which of these sequences they are (the others were acknowledged before this start, so decided)", runs[0]),
		"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "from_sequence", runs[0].from, "through_sequence", runs[len(runs)-1].through,
		"messages_at_most", k, "sequences", runsText(runs))
	c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: int(k)})
}

// earlier adds to msg, when first starts at or below the stream sequence
// the server had delivered before the bind, that a process before this
// one may have decided those and stopped before its acknowledgement.
func (c *Consumer) earlier(msg string, first span) string {
	if first.from > c.deliveredBefore {
		return msg
	}
	return fmt.Sprintf("%s; but one the server had delivered before this start (at or below stream sequence %d) and never saw acknowledged may have been decided then, before a stop took its acknowledgement: the audit log holds such a decision", msg, c.deliveredBefore)
}

// runsText writes runs as 3-7,9,12-14, the first 20 of them.
func runsText(runs []span) string {
	var b strings.Builder
	for i, r := range runs {
		if i == 20 {
			fmt.Fprintf(&b, ",… (%d runs)", len(runs))
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		if r.from == r.through {
			fmt.Fprintf(&b, "%d", r.from)
		} else {
			fmt.Fprintf(&b, "%d-%d", r.from, r.through)
		}
	}
	return b.String()
}
