package jetstream

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/replayguard/replayguard/source"
)

// A stream deleted while Run consumes it (`nats stream rm`, or deleted
// and created again) takes its consumer with it, and every message of it
// the consumer had not received: Run ends with ErrConsumerDeleted, and
// what the stream took is told here, as far as the server had shown the
// stream's end before it went.

// streamEnd is the highest stream sequence the server has shown the
// stream to hold, and when it last told: the stream's last sequence at
// the bind and at each check, and, at each delivery, the message's
// stream sequence plus the messages the consumer had pending after it
// (each of those lies past it). Its methods are safe for concurrent use.
type streamEnd struct {
	mu  sync.Mutex
	seq uint64
	at  time.Time
}

// note records that the stream held a message at seq or beyond, as the
// server told at at.
func (s *streamEnd) note(seq uint64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = max(s.seq, seq)
	if at.After(s.at) {
		s.at = at
	}
}

// reset forgets what a bind before told.
func (s *streamEnd) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq, s.at = 0, time.Time{}
}

func (s *streamEnd) get() (uint64, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq, s.at
}

// tellGone tells, when the stream went while Run consumed it (deleted()
// found it gone), the messages of it this consumer had not decided: the
// stream sequences after those accounted for, up to the stream's end as
// last told, that it never received, and those it received and left
// undecided at the stop (left). They are exact for a consumer of the
// whole stream that received every delivery the server made, else an
// upper bound (another member's, another subject's). Messages the stream
// stored after the server last told its end are not known. It runs once
// Run's goroutines have stopped.
func (c *Consumer) tellGone(left []delivery) {
	gone := c.streamWent.Load()
	if gone == nil {
		return
	}
	end, at := c.end.get()
	runs, ok := c.receipts.unreceived(c.accounted, end)
	if !ok { // what the receipts dropped, they cannot tell apart
		runs = nil
		if end > c.accounted {
			runs = []span{{c.accounted + 1, end}}
		}
	}
	// Of what the server had delivered before this bind, only what it
	// held unacknowledged, or passed over, can be lost (owed).
	runs, before := c.owed.cut(runs)
	owedN := c.owed.tell(total(before))
	n := total(runs) + owedN
	// A delivery left undecided is told whatever the span's bound, which
	// counts it as come again: unless a run told in full holds it.
	held, whole := undecidedLeft(left), runs
	for _, seq := range held {
		if !within(whole, seq) {
			runs = append(runs, span{seq, seq})
			n++
		}
	}
	if owedN > 0 {
		runs = append(runs, before...)
	}
	if len(runs) == 0 {
		return
	}
	slices.SortFunc(runs, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	msg := fmt.Sprintf("jetstream: the stream was deleted with messages this consumer had not decided (%s): never received, or received and left undecided at the stop, "+
		"they have no decision and no audit record, and nothing will deliver them; messages the stream stored after %s, when the server last told its end, are not known and not counted",
		*gone, at.Format(time.RFC3339))
	count := "messages"
	exact := ok && len(c.cfg.Subjects) == 0 && c.receipts.whole(c.verified) && owedN == 0
	if owedN > 0 {
		msg += fmt.Sprintf("; of those the server had delivered before this start (up to stream sequence %d), at most %d were left unacknowledged or passed over, the others decided and acknowledged then", c.deliveredBefore, owedN)
	}
	if !exact {
		count = "messages_at_most"
		msg += "; an upper bound: some may not be of the consumer's subjects (jetstream.subjects), or were delivered elsewhere (another member of the group, a connection lost) and decided there"
	}
	c.log.Error(c.earlier(msg, runs[0]), "stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "from_sequence", runs[0].from,
		"through_sequence", runs[len(runs)-1].through, count, n, "held_undecided", len(held), "sequences", runsText(runs))
	c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: int(n)})
}

// within says whether seq lies in one of runs, sorted and apart.
func within(runs []span, seq uint64) bool {
	i, _ := slices.BinarySearchFunc(runs, seq, func(r span, seq uint64) int { return cmp.Compare(r.through, seq) })
	return i < len(runs) && runs[i].from <= seq
}

// undecidedLeft returns the stream sequences of the deliveries of left
// that no commit decided, but for those taken from the stream after the
// server gave up on them (tellTakenLeft tells those).
func undecidedLeft(left []delivery) []uint64 {
	var seqs []uint64
	for i := range left {
		if _, isTaken := left[i].js.(taken); !isTaken && !left[i].msg.Decided() && left[i].streamSeq > 0 {
			seqs = append(seqs, left[i].streamSeq)
		}
	}
	return seqs
}
