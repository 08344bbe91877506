package jetstream

import (
	"slices"
	"sort"
	"sync"
)

// maxGaps bounds the gaps a seen keeps: a filter that takes every other
// message of a fast stream passes over one run of sequences per message.
// Past it, the oldest half is dropped, and what they covered is no longer
// told apart (see seen.unseen).
const maxGaps = 1 << 16

// receipts is what the consumer received, kept so that a check can tell
// the stream sequences it never received: the ones the server moved it
// past (a purge moves it at once) leave no other trace. It keeps the
// stream sequences received, and the consumer sequences (one per
// delivery, in order), which tell whether every delivery the server made
// up to a point came here. received runs on the goroutine that pulls, in
// delivery order; the rest on watch's.
type receipts struct {
	mu         sync.Mutex
	stream     seen
	deliveries seen
}

// reset starts the receipts of a bind: every stream sequence up to
// through is accounted for, and delivered is the consumer's delivered
// sequence (deliveries above it are this bind's).
func (r *receipts) reset(through, delivered uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stream = seen{last: through, from: through}
	r.deliveries = seen{last: delivered, from: delivered}
}

// received records a delivery: the message at stream sequence sseq,
// delivered as the consumer's dseq-th.
func (r *receipts) received(sseq, dseq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stream.note(sseq)
	r.deliveries.note(dseq)
}

// taken records a message taken from the stream at sseq rather than
// delivered (the server gave up on it): received, though no delivery of
// the consumer's brought it.
func (r *receipts) taken(sseq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stream.note(sseq)
}

// complete reports whether every delivery after after, up to through
// (consumer sequences), came here.
func (r *receipts) complete(after, through uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	runs, ok := r.deliveries.unseen(after, through)
	r.deliveries.forget(after)
	return ok && len(runs) == 0
}

// whole reports whether every delivery after after (a consumer
// sequence), up to the last one received, came here.
func (r *receipts) whole(after uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	runs, ok := r.deliveries.unseen(after, r.deliveries.last)
	return ok && len(runs) == 0
}

// rewound forgets the deliveries counted: the server's count of them
// went back, and counts again from there. What came before the next
// check's count is not asked about (see complete).
func (r *receipts) rewound() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = seen{}
}

// below returns the highest stream sequence below seq that was received,
// or accounted for at the bind; ok is false when gaps that could hold it
// were dropped.
func (r *receipts) below(seq uint64) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stream.below(seq)
}

// unreceived returns the runs of stream sequences after after, up to
// through, never received; ok is false when gaps that could hold some
// were dropped.
func (r *receipts) unreceived(after, through uint64) ([]span, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stream.unseen(after, through)
}

// forget drops what is known of the stream sequences up to through:
// accounted for.
func (r *receipts) forget(through uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stream.forget(through)
}

// seen is a set of sequences that arrive mostly in increasing order: the
// highest, and the runs below it not seen.
type seen struct {
	last uint64 // the highest sequence seen, or accounted for (forget)
	gaps []span // the runs below last not seen, in order
	from uint64 // gaps are known above it: those below were dropped (maxGaps) or forgotten
}

// span is the sequences from..through, both included.
type span struct{ from, through uint64 }

func (s span) len() uint64 { return s.through - s.from + 1 }

func (s *seen) note(seq uint64) {
	switch {
	case seq > s.last+1:
		if len(s.gaps) == maxGaps {
			half := maxGaps / 2
			s.from = s.gaps[half-1].through
			s.gaps = append(s.gaps[:0], s.gaps[half:]...)
		}
		s.gaps = append(s.gaps, span{s.last + 1, seq - 1})
		s.last = seq
	case seq == s.last+1:
		s.last = seq
	default: // seen late: a message delivered again
		s.fill(seq)
	}
}

// fill takes seq out of the gap that holds it.
func (s *seen) fill(seq uint64) {
	i := sort.Search(len(s.gaps), func(i int) bool { return s.gaps[i].through >= seq })
	if i == len(s.gaps) || s.gaps[i].from > seq {
		return
	}
	g := s.gaps[i]
	var parts []span
	if seq > g.from {
		parts = append(parts, span{g.from, seq - 1})
	}
	if seq < g.through {
		parts = append(parts, span{seq + 1, g.through})
	}
	s.gaps = slices.Replace(s.gaps, i, i+1, parts...)
}

// below returns the highest sequence below seq that was seen.
func (s *seen) below(seq uint64) (uint64, bool) {
	if s.last < seq {
		return s.last, true
	}
	i := sort.Search(len(s.gaps), func(i int) bool { return s.gaps[i].through >= seq-1 })
	if i < len(s.gaps) && s.gaps[i].from <= seq-1 {
		return s.gaps[i].from - 1, s.gaps[i].from > s.from
	}
	return seq - 1, seq-1 >= s.from
}

// unseen returns the runs of sequences after after, up to through, not
// seen.
func (s *seen) unseen(after, through uint64) (runs []span, ok bool) {
	for _, g := range s.gaps {
		if g.through <= after || g.from > through {
			continue
		}
		runs = append(runs, span{max(g.from, after+1), min(g.through, through)})
	}
	if through > s.last {
		runs = append(runs, span{max(s.last, after) + 1, through})
	}
	return runs, after >= s.from
}

// forget takes every sequence up to through as accounted for: the gaps
// drop what they hold up to it, and one seen next leaves a gap only
// after it.
func (s *seen) forget(through uint64) {
	i := sort.Search(len(s.gaps), func(i int) bool { return s.gaps[i].through > through })
	s.gaps = s.gaps[i:]
	if len(s.gaps) > 0 && s.gaps[0].from <= through {
		s.gaps[0].from = through + 1
	}
	s.from = max(s.from, through)
	s.last = max(s.last, through)
}
