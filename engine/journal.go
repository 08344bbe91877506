package engine

import (
	"errors"
	"fmt"
	"time"
)

// Journal keeps, outside a shared store, what this member committed to it:
// the chain head after each commit (the witness a store that failed over
// is compared with) and the deliveries each batch decided, so that a
// store that comes back without some of them can be given them again
// (DESIGN.md, "A store that fails over"). Package journal has one on a
// local directory.
//
// The engine calls Append after each commit to the store and before the
// commit's caller hears of it (so before any delivery is acknowledged),
// from one goroutine at a time; Last and Replay may be called between
// Appends, never during one.
type Journal interface {
	// Append writes e durably: when it returns nil, e survives a crash of
	// this process and of the machine.
	Append(e JournalEntry) error
	// Last returns the newest batch entry (zero when there is none) and,
	// when a recovery was started and never finished, its start marker.
	Last() (last JournalEntry, recovering *JournalEntry)
	// Replay calls fn, in append order, for every batch appended after the
	// newest batch whose Head is after; when no batch has that head, for
	// every batch appended after the newest one at or below after's
	// position (taking a few too many is safe: they are decided again as
	// duplicates). Markers are skipped. uncovered is the part of the chain
	// above after that the journal no longer holds (trimmed by its
	// retention, or written before it existed); it is empty when the
	// journal reaches down to after. fn nil only computes uncovered.
	Replay(after AuditHead, fn func(JournalEntry) error) (uncovered Span, err error)
}

// JournalEntry is one record of a Journal: a committed batch, or a
// recovery's start or end marker.
type JournalEntry struct {
	Kind JournalKind
	// Head is the chain head after the batch; for a marker, the store's
	// head the recovery starts from.
	Head AuditHead
	// First is the position of the batch's first record.
	First uint64
	// Time is when the entry was appended: where the store reads its
	// server's clock, by the group's clock (ServerClock, advanced by this
	// process's monotonic clock between readings), which a step of this
	// member's wall clock does not move; else by the wall clock. The
	// journal's retention runs by it. Entries written before it was the
	// group's carry the wall clock.
	Time time.Time
	// KeyTime is, for a batch, the group's clock (the store server's,
	// ServerClock) its keys were stamped by: a recovery judges by it
	// whether the batch's keys may have left the key window. Zero where
	// the store reads no server clock, and in entries written before it
	// existed: the batch's age is then judged by Time.
	KeyTime time.Time
	// Messages are the deliveries the batch decided, in order (Topic,
	// Payload, Dup, Broker, Invalid, Feed, Connected); none for an
	// operator's action.
	Messages []Message
	// Effective says of each of Messages whether it was applied (or
	// applied late): only those are let in below the window when they
	// are decided again.
	Effective []bool
	// Action is, for a batch that decided no delivery, the outcome of its
	// first record: "discarded", "released", a forward review, or the
	// member's own "recovered" and "loss_accepted"; for a recovery's start
	// marker, "loss_accepted" when an operator accepted what no journal
	// holds.
	Action string
	// Lost is, for a recovery's start marker, the head the member had
	// committed before the store lost part of it.
	Lost AuditHead
	// Redecides is, for a batch a recovery decided again from the
	// journal, the Head of the lost batch it decided again: a recovery cut
	// short (the store failed again, or the member was killed before its
	// end was journaled) is taken up again without deciding anew what the
	// store holds a decision of. Zero for every other entry.
	Redecides AuditHead
}

// JournalKind says what a JournalEntry records.
type JournalKind uint8

// The journal's entry kinds.
const (
	JournalBatch         JournalKind = iota + 1 // a committed batch
	JournalRecoveryStart                        // deciding lost batches again began
	JournalRecoveryDone                         // ... and ended: every lost batch has a new decision
)

// Span is an inclusive range of audit positions; empty when From > To,
// and when To is 0 (positions start at 1), so its zero value is empty.
type Span struct{ From, To uint64 }

// Empty reports whether s holds no position.
func (s Span) Empty() bool { return s.From > s.To || s.To == 0 }

func (s Span) String() string {
	switch {
	case s.Empty():
		return "none"
	case s.From == s.To:
		return fmt.Sprint(s.From)
	}
	return fmt.Sprintf("%d..%d", s.From, s.To)
}

// ErrStoreBehind is returned, while the loss is not recovered, for every
// batch a member is given after it found its shared store without commits
// it had made (a failover to a replica that had not received them). The
// member decides and acknowledges nothing meanwhile.
var ErrStoreBehind = errors.New("replayguard: the store lost commits this member made and acknowledged")

// StoreLoss is a detected loss of this member's commits: the chain
// positions the store no longer holds, and what of them no journal covers.
type StoreLoss struct {
	Store    string    // the store, as its handle names it
	Member   string    // whose chain
	Lost     Span      // positions committed, acknowledged, and no longer in the store
	Head     AuditHead // the store's head of the member's chain when it was found
	Known    AuditHead // the head this member had committed
	Forked   bool      // the store holds another record at Known.Position: its chain forked
	Detected time.Time
	// Uncovered are the lost positions no journal holds: they can only be
	// accepted by an operator (AcceptLoss). Empty when the journal covers
	// the whole loss, which is then recovered without anyone.
	Uncovered Span
	// Reason is why recovery has not happened yet, when it has not: the
	// error that stopped it.
	Reason string

	forkAt       uint64    // where the store holds another record, when below Known (Forked; 0: at Known)
	from         AuditHead // the journal is replayed after this head
	marked       bool      // the journal holds this recovery's start
	accepted     bool      // an operator accepted what no journal holds
	acceptedSpan Span      // ... these positions
	operator     string    // ... this operator
}

func (l *StoreLoss) Error() string {
	what := fmt.Sprintf("the %s store holds member %q's chain up to position %d, but this member committed up to %d: positions %s were acknowledged and lost",
		l.Store, l.Member, l.Head.Position, l.Known.Position, l.Lost)
	if l.Forked {
		at := l.Known.Position
		if l.forkAt > 0 {
			at = l.forkAt
		}
		what = fmt.Sprintf("the %s store holds another record at position %d of member %q's chain than the one this member committed: the chain forked (a store that lost commits was written on)",
			l.Store, at, l.Member)
	}
	switch {
	case l.accepted && l.Reason != "":
		what += fmt.Sprintf("; %s, and the recovery of what the journal holds is tried again: it failed: %s", l.acceptance(), l.Reason)
	case l.accepted:
		what += fmt.Sprintf("; %s, and what the journal holds is being decided again", l.acceptance())
	case l.Forked:
		what += fmt.Sprintf("; an operator accepts the store's chain as the member's with `replayguard store accept-loss --operator NAME`: "+
			"the member's own records at positions %s are then gone from it, and what the journal holds of them is decided again", l.Uncovered)
	case !l.Uncovered.Empty():
		what += fmt.Sprintf("; positions %s cannot be recovered (no journal holds them): an operator accepts the loss with `replayguard store accept-loss --operator NAME`", l.Uncovered)
	case l.Reason != "":
		what += "; recovery from the journal failed: " + l.Reason
	}
	return what
}

// acceptance says what an operator accepted: the positions given up, or,
// where the journal held all of them (a fork accepted), the store's chain.
func (l *StoreLoss) acceptance() string {
	who := l.operator
	if who == "" { // a recovery resumed at a start: the journal's marker names no one
		who = "an operator"
	}
	if l.acceptedSpan.Empty() {
		return fmt.Sprintf("%s accepted the store's chain as the member's, the journal holding every position it lacked", who)
	}
	return fmt.Sprintf("positions %s were accepted as lost by %s", l.acceptedSpan, who)
}

// Unwrap makes a StoreLoss an ErrStoreBehind.
func (l *StoreLoss) Unwrap() error { return ErrStoreBehind }
