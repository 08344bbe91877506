package jetstream

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// What the server had delivered before a bind, after the consumer's ack
// floor, is not what the consumer never received. nats-server keeps the
// acknowledgements above the floor one by one: after acknowledgements
// lost with a connection or a server crash, the floor stays below
// messages acknowledged since, each decided by the process that
// acknowledged it. Of the stream sequences after the floor up to the
// consumer's delivered one, those the server holds as ack pending were
// not acknowledged, and it delivers them again, here or to another
// member, unless the stream removes them first; which ones they are, it
// does not tell. Nor were those it passed over without delivering them:
// removed from the stream before it reached them, or given up on after
// a max_deliver (skippedOver counts them, or the whole span when it cannot
// tell). So of that span, what this bind never receives is told lost only
// up to those counts, less the pending ones delivered here again.

// owed is that span of a bind, and what it was owed of it. Its methods
// are safe for concurrent use: received runs on the goroutine that pulls,
// the rest on watch's or Run's.
type owed struct {
	mu             sync.Mutex
	after, through uint64 // the span: after < seq <= through
	pending        uint64 // of the span, how many can have been left undecided at the bind
	told           uint64 // told lost since
	again          map[uint64]struct{}
}

// reset starts the span of a bind: the ack floor, the delivered stream
// sequence, and how many of the span can have been left undecided (the ack
// pending count the server gave, and what it passed over).
func (o *owed) reset(floor, delivered, pending uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.after, o.through, o.pending, o.told, o.again = floor, max(floor, delivered), pending, 0, map[uint64]struct{}{}
}

// received notes a delivery of stream sequence seq: one of the span is a
// pending message delivered again.
func (o *owed) received(seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if seq > o.after && seq <= o.through && uint64(len(o.again)) < o.pending {
		o.again[seq] = struct{}{}
	}
}

// cut splits runs, in order, into the parts outside the span and those
// inside it.
func (o *owed) cut(runs []span) (outside, inside []span) {
	o.mu.Lock()
	lo, hi := o.after+1, o.through
	o.mu.Unlock()
	for _, r := range runs {
		if r.through < lo || r.from > hi || lo > hi {
			outside = append(outside, r)
			continue
		}
		if r.from < lo {
			outside = append(outside, span{r.from, lo - 1})
		}
		inside = append(inside, span{max(r.from, lo), min(r.through, hi)})
		if r.through > hi {
			outside = append(outside, span{hi + 1, r.through})
		}
	}
	return outside, inside
}

// tell returns how many of n sequences of the span never received here
// can have been left undecided: those ack pending at the bind, less those
// delivered here again and those told before. It counts them as told.
func (o *owed) tell(n uint64) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	left := o.pending - min(o.pending, uint64(len(o.again))+o.told)
	k := min(n, left)
	o.told += k
	return k
}

// total is how many sequences runs hold.
func total(runs []span) uint64 {
	var n uint64
	for _, r := range runs {
		n += r.len()
	}
	return n
}

// skippedOver counts, at the bind, the stream sequences after the ack floor
// up to the delivered one that the server may have passed over without
// delivering them: those the stream no longer holds from its start, and
// those deleted inside it; all of them when it cannot tell (more deleted
// than it lists, or a max_deliver, gaveUp, by which the server may have
// given up on messages).
func (c *Consumer) skippedOver(ctx context.Context, st jetstream.Stream, si *jetstream.StreamInfo, floor, delivered uint64, gaveUp bool) uint64 {
	if delivered <= floor {
		return 0
	}
	span := delivered - floor
	if gaveUp {
		return span
	}
	var n uint64
	lo := floor + 1
	if first := si.State.FirstSeq; first > lo {
		n += min(first, delivered+1) - lo
		lo = first
	}
	if lo > delivered || si.State.NumDeleted == 0 {
		return n
	}
	var rd reading
	c.readDeleted(ctx, st, si, &rd)
	if !rd.listed {
		return span
	}
	for _, seq := range rd.deleted {
		if seq >= lo && seq <= delivered {
			n++
		}
	}
	return n
}
