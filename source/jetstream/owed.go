package jetstream

import "sync"

// What the server had delivered before a bind, after the consumer's ack
// floor, is not what the consumer never received. nats-server keeps the
// acknowledgements above the floor one by one: after acknowledgements
// lost with a connection or a server crash, the floor stays below
// messages acknowledged since, each decided by the process that
// acknowledged it. Of the stream sequences after the floor up to the
// consumer's delivered one, only those the server holds as ack pending
// were not acknowledged, and it delivers them again, here or to another
// member, unless the stream removes them first; which ones they are, it
// does not tell. So of that span, what this bind never receives is told
// lost only up to the ack pending count, less those delivered here again.

// owed is that span of a bind, and what it was owed of it. Its methods
// are safe for concurrent use: received runs on the goroutine that pulls,
// the rest on watch's or Run's.
type owed struct {
	mu             sync.Mutex
	after, through uint64 // the span: after < seq <= through
	pending        uint64 // ack pending at the bind
	told           uint64 // told lost since
	again          map[uint64]struct{}
}

// reset starts the span of a bind: the ack floor, the delivered stream
// sequence and the ack pending count the server gave.
func (o *owed) reset(floor, delivered uint64, pending int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.after, o.through, o.pending, o.told, o.again = floor, max(floor, delivered), uint64(max(pending, 0)), 0, map[uint64]struct{}{}
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
