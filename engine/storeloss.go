package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Audit outcomes of what a member does about a store that lost its
// commits: the recovery from its journal, and an operator's acceptance of
// what no journal held.
const (
	OutcomeRecovered    = "recovered"
	OutcomeLossAccepted = "loss_accepted"
)

// headReadTimeout bounds CheckStore's read of the store's head.
const headReadTimeout = 5 * time.Second

// reasonRecovered ends the reason of every decision made again from the
// journal.
const reasonRecovered = "recovered from the journal: the store had lost it"

// reasonNotAppliedFirst is why a delivery decided again from the journal,
// which was not applied when first decided (a duplicate, or held), is held
// where it would now be applied: a duplicate's first copy may have left the
// key window since, and nothing proves it is not one.
const reasonNotAppliedFirst = "not applied when first decided, and decided again from the journal: held, as it may be a duplicate whose first copy has left the key window"

// reasonStale is why a delivery of a lost batch older than window.ttl, by
// the clock the group's keys age by (see staleBatch), is held where it
// would now be applied: its first copy's key may have left the key window.
// Held, it is neither applied twice nor lost.
const reasonStale = "lost by the store in a batch older than window.ttl, and decided again from the journal: held, as its key may have left the key window since"

// LossStats count what this engine found and did about store losses.
type LossStats struct {
	Detected  uint64 // losses found (a store head behind the journal's, or forked)
	Recovered uint64 // deliveries decided again from the journal, counted before the observer hears of their commit
	Accepted  uint64 // losses an operator accepted
}

// Loss returns the store loss that keeps this member from deciding, or nil.
func (e *Engine) Loss() *StoreLoss {
	e.lossMu.Lock()
	defer e.lossMu.Unlock()
	if e.loss == nil {
		return nil
	}
	l := *e.loss
	return &l
}

// LossStats returns the store-loss counters.
func (e *Engine) LossStats() LossStats {
	e.lossMu.Lock()
	defer e.lossMu.Unlock()
	return e.lossStats
}

func (e *Engine) setLoss(l *StoreLoss) {
	e.lossMu.Lock()
	e.loss = l
	e.lossMu.Unlock()
}

// CheckStore compares the shared store's head of this member's chain with
// the one it committed and, when the store lost commits, recovers them
// from the journal before it returns; run calls it every few seconds, so
// that a member with nothing to decide finds a failover too. It returns
// the loss while one keeps the member from deciding; nil on a
// single-owner store.
func (e *Engine) CheckStore(ctx context.Context) error { return e.win.checkStore(ctx) }

func (w *sharedWindows) checkStore(ctx context.Context) error {
	e := w.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if err := w.appendUnjournaled(); err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, headReadTimeout) // decisions wait meanwhile: a store that does not answer must not hold them
	head, err := w.store.Head(hctx)
	cancel()
	if err != nil {
		return fmt.Errorf("read the store's chain head: %w", err)
	}
	if l := e.Loss(); l != nil {
		return w.recoverLoss(ctx, l, head)
	}
	e.headMu.Lock()
	same := e.head == head
	e.headMu.Unlock()
	if same && !e.reload.Load() {
		return nil
	}
	return w.checkHead(ctx, head, w.known())
}

// retryLoss tries again to recover the loss that stops this member, if
// one does, on the store's current head. Called with e.mu held before
// deciding.
func (w *sharedWindows) retryLoss(ctx context.Context) error {
	l := w.e.Loss()
	if l == nil {
		return nil
	}
	if err := w.appendUnjournaled(); err != nil {
		return err
	}
	head, err := w.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("%w (and reading the store's chain head again: %v)", l, err)
	}
	return w.recoverLoss(ctx, l, head)
}

// known is the head this member committed and had acknowledged: the
// journal's, or without one the committed head in memory.
func (w *sharedWindows) known() AuditHead {
	e := w.e
	if w.journal != nil {
		last, _ := w.journal.Last()
		return last.Head
	}
	e.headMu.Lock()
	defer e.headMu.Unlock()
	return e.head
}

// checkHead compares the store's head with known, the one this member
// committed, and makes the store's head the engine's when it holds
// everything; otherwise it recovers the loss. Called with e.mu held.
func (w *sharedWindows) checkHead(ctx context.Context, head, known AuditHead) error {
	e := w.e
	if w.journal != nil {
		if _, pending := w.journal.Last(); pending != nil {
			// A recovery that did not finish (a crash during it): decide
			// again everything from where it began.
			l := &StoreLoss{Store: e.storeName, Member: e.member, Head: head, Known: pending.Lost,
				Lost: Span{From: pending.Head.Position + 1, To: pending.Lost.Position}, Detected: e.opts.Now(), from: pending.Head,
				marked: true, accepted: pending.Action == OutcomeLossAccepted}
			e.noteLoss(l, "a recovery from the journal did not finish: resuming it")
			return w.recoverLoss(ctx, l, head)
		}
	}
	l, err := e.compare(ctx, head, known)
	if err != nil {
		return err
	}
	if l != nil {
		if err := w.findFork(ctx, l, head, known); err != nil {
			return err
		}
	}
	if l == nil {
		if err := w.noteUnacked(ctx, head, known); err != nil {
			return err
		}
		e.rebase(head)
		return nil
	}
	e.noteLoss(l, "the store lost commits this member acknowledged: deciding and acknowledging stop until they are recovered")
	return w.recoverLoss(ctx, l, head)
}

// findFork makes l, a loss compare found, a fork where the store's chain
// is not the member's (forkedBelow, or compare's own), and has the
// recovery an operator accepts decide again every unit of the journal
// after the last one the store still holds as the member committed it:
// those the fork wrote over are the member's lost commits too.
func (w *sharedWindows) findFork(ctx context.Context, l *StoreLoss, head, known AuditHead) error {
	var below []AuditHead
	if l.Forked { // the store holds another record at known: the units below it
		if w.journal == nil {
			return nil
		}
		units, err := w.chainUnits()
		if err != nil {
			return fmt.Errorf("read the journal: %w", err)
		}
		for _, u := range units {
			if u.Head.Position < known.Position {
				below = append(below, u.Head)
			}
		}
	} else {
		forked, heads, err := w.forkedBelow(head)
		if err != nil {
			return fmt.Errorf("read the journal: %w", err)
		}
		if !forked {
			return nil
		}
		below, l.Forked, l.forkAt = heads, true, head.Position
	}
	from, err := w.e.lastHeld(ctx, below)
	if err != nil {
		return err
	}
	l.from = from
	l.Lost = Span{From: from.Position + 1, To: known.Position}
	l.Uncovered = l.Lost
	return nil
}

// forkedBelow reports whether the store's head, below what the member
// committed, is a record the member did not commit there: a committed
// unit of the member's own the journal holds (a batch, a part of one, an
// operator's action, a recovery's record) holds the head's position, and
// the head lies inside it, which the member committed whole, or at its
// end with another hash. Something else wrote the member's chain on a
// store that had lost the member's commits (a command run under the
// member's id, its lease lost with them); taking the store's records
// there for the member's would pass over the unit's deliveries, never
// decided again. Not when a unit the journal holds ends at the head, or
// none holds its position (below the journal's retention, or written by
// a command under the member's id, which keeps no journal): that is not
// judged. below are the heads of the units the journal holds before the
// head's position, ascending.
func (w *sharedWindows) forkedBelow(head AuditHead) (forked bool, below []AuditHead, err error) {
	if w.journal == nil || head.Position == 0 {
		return false, nil, nil
	}
	units, err := w.chainUnits()
	if err != nil {
		return false, nil, err
	}
	covered, mine := false, false
	for _, u := range units {
		switch {
		case u.Head.Position < head.Position:
			below = append(below, u.Head)
		case u.Accepted && u.Head != head: // records of the store's that an operator took for the member's
		case u.First <= head.Position:
			covered, mine = true, mine || u.Head == head
		}
	}
	if !covered || mine {
		return false, nil, nil
	}
	return true, below, nil
}

// chainUnit is a unit of the member's committed chain the journal holds:
// its first position and its head.
type chainUnit struct {
	First uint64
	Head  AuditHead
	// Accepted says the unit is records an operator accepted as the
	// member's (a fork, or an acceptance's own record): not decided as a
	// whole, so a head inside it is not judged.
	Accepted bool
}

// chainUnits returns the units the journal holds of the member's chain as
// it was last committed, ascending: a unit committed after a store lost
// some (a recovery's, an acceptance's) starts where the chain went on,
// and the units it was committed over, lost with the store's copy, are
// left out. Units without a first position (written before entries had
// one) are too.
func (w *sharedWindows) chainUnits() ([]chainUnit, error) {
	var units []chainUnit
	_, err := w.journal.Replay(AuditHead{}, func(je JournalEntry) error {
		if je.First == 0 {
			return nil
		}
		for len(units) > 0 && units[len(units)-1].Head.Position >= je.First {
			units = units[:len(units)-1]
		}
		units = append(units, chainUnit{First: je.First, Head: je.Head, Accepted: len(je.Messages) == 0 && je.Action == OutcomeLossAccepted})
		return nil
	})
	return units, err
}

// lastHeld returns the highest of heads, ascending, whose record the
// store holds as the member committed it (or has archived, which it
// cannot show); zero when none: a recovery from there decides again the
// journal's every unit after it.
func (e *Engine) lastHeld(ctx context.Context, heads []AuditHead) (AuditHead, error) {
	if e.caps.Chains == nil {
		return AuditHead{}, nil
	}
	for i := len(heads) - 1; i >= 0; i-- {
		link, archived, err := ChainLink(ctx, e.caps.Chains, e.caps.Keeper, e.member, heads[i].Position)
		if err != nil {
			return AuditHead{}, fmt.Errorf("read the store's chain below a fork: %w", err)
		}
		if archived || link == heads[i] {
			return heads[i], nil
		}
	}
	return AuditHead{}, nil
}

// compare returns the loss when the store's head is behind known, or the
// store holds another record at known's position; nil when it holds
// everything known names.
func (e *Engine) compare(ctx context.Context, head, known AuditHead) (*StoreLoss, error) {
	l := &StoreLoss{Store: e.storeName, Member: e.member, Head: head, Known: known, Detected: e.opts.Now(), from: head}
	switch {
	case known.Position == 0:
		return nil, nil
	case head.Position < known.Position:
		l.Lost = Span{From: head.Position + 1, To: known.Position}
		return l, nil
	case head.Position == known.Position:
		if head.Hash == known.Hash {
			return nil, nil
		}
	default: // ahead: commits whose journal append never returned (never acknowledged); the record at known must be known's
		cs := e.caps.Chains
		if cs == nil {
			return nil, fmt.Errorf("%w: store %T cannot read a member's chain", ErrConfig, e.store)
		}
		link, archived, err := ChainLink(ctx, cs, e.caps.Keeper, e.member, known.Position)
		if err != nil {
			return nil, err
		}
		if archived {
			// Retention (another member's, which took over this chain)
			// moved it into the archive: the store cannot show it.
			e.log.Warn("the journal's head is archived: compared with the store's head only", "position", known.Position)
			return nil, nil
		}
		if link.Hash == known.Hash {
			return nil, nil
		}
	}
	l.Forked = true
	l.Lost = Span{From: known.Position, To: known.Position}
	l.Uncovered = l.Lost
	return l, nil
}

// ChainLink returns the link (position and hash) of member's record at
// pos in a shared store: the record's, or the chain's base when audit
// retention trimmed the chain up to pos. archived says that retention
// moved the record into the archive, below the base: the store cannot show
// it. keep may be nil (a store that trims nothing).
func ChainLink(ctx context.Context, cs ChainScanner, keep ChainBaser, member string, pos uint64) (link AuditHead, archived bool, err error) {
	for try := 0; ; try++ {
		if keep != nil {
			base, err := keep.ChainBase(ctx, member)
			switch {
			case err != nil:
				return AuditHead{}, false, err
			case pos > 0 && pos == base.Position:
				return base, false, nil
			case pos < base.Position:
				return AuditHead{}, true, nil
			}
		}
		rec, err := ChainRecord(ctx, cs, member, pos)
		if errors.Is(err, ErrNoRecord) && keep != nil && try == 0 {
			continue // trimmed between the two reads: read the base again
		}
		return AuditHead{Position: rec.Position, Hash: rec.Hash}, false, err
	}
}

// ErrNoRecord is returned by ChainRecord for a position its chain does not
// hold.
var ErrNoRecord = errors.New("replayguard: no audit record at that position")

// ChainRecord reads member's record at pos from a shared store's chains.
func ChainRecord(ctx context.Context, cs ChainScanner, member string, pos uint64) (AuditRecord, error) {
	var rec AuditRecord
	stop := errors.New("stop")
	err := cs.ScanChain(ctx, member, pos, func(r AuditRecord) error { rec = r; return stop })
	switch {
	case errors.Is(err, stop) && rec.Position == pos:
		return rec, nil
	case err == nil || errors.Is(err, stop):
		return AuditRecord{}, fmt.Errorf("%w: position %d of member %q's chain", ErrNoRecord, pos, member)
	}
	return AuditRecord{}, fmt.Errorf("read position %d of member %q's chain: %w", pos, member, err)
}

// noteLoss makes l the loss that stops this member and says so.
func (e *Engine) noteLoss(l *StoreLoss, what string) {
	e.lossMu.Lock()
	if e.loss == nil {
		e.lossStats.Detected++
	}
	e.loss = l
	e.lossMu.Unlock()
	e.log.Error(what, "store", l.Store, "member", l.Member, "lost", l.Lost.String(), "store_head", l.Head.Position,
		"committed_head", l.Known.Position, "forked", l.Forked)
}

// AcceptLoss is an operator's acceptance of the loss that stops this
// member: what no journal holds is gone. It writes an audit record naming
// the lost positions and the operator, decides again what the journal does
// hold, and lets the member decide again. operator is required. A loss the
// journal holds whole is refused with ErrLossCovered: the member recovers
// it by itself.
func (e *Engine) AcceptLoss(ctx context.Context, operator string) (StoreLoss, error) {
	if operator == "" {
		return StoreLoss{}, fmt.Errorf("%w: accepting a loss needs the operator's name", ErrConfig)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.win.acceptLoss(ctx, operator)
}

func (w *sharedWindows) acceptLoss(ctx context.Context, operator string) (StoreLoss, error) {
	e := w.e
	l := e.Loss()
	switch {
	case l == nil:
		return StoreLoss{}, ErrNoLoss
	case l.accepted:
		return *l, fmt.Errorf("%w: %s; the recovery of the rest is being retried: %s", ErrLossCovered, l.acceptance(), l.Reason)
	case w.journal != nil && !l.Forked && l.Uncovered.Empty():
		return *l, fmt.Errorf("%w: the journal holds every lost position (%s); the member recovers them by itself as soon as the store takes its writes: %s", ErrLossCovered, l.Lost, l.Reason)
	}
	if err := w.appendUnjournaled(); err != nil {
		return *l, err
	}
	head, err := w.store.Head(ctx)
	if err != nil {
		return *l, fmt.Errorf("read the store's chain head: %w", err)
	}
	gone := l.Uncovered
	why := fmt.Sprintf("the %s store lost positions %s of member %q's chain (committed up to %d, the store's head was %d); positions %s are in no journal and are accepted as lost",
		l.Store, l.Lost, l.Member, l.Known.Position, l.Head.Position, gone)
	if l.Forked {
		at := l.Known.Position
		if l.forkAt > 0 {
			at = l.forkAt
		}
		why = fmt.Sprintf("the %s store holds another record than member %q committed at position %d of its chain (a fork); the store's chain up to its head %d is accepted as the member's",
			l.Store, l.Member, at, head.Position)
		if w.journal != nil {
			why += fmt.Sprintf(", and what the journal holds of the member's own after position %d is decided again", l.from.Position)
		}
	}
	given := gone // the member's positions whose decisions are given up
	switch {
	case l.Forked && w.journal != nil:
		// The journal's units after l.from are decided again: what it
		// does not hold of the member's own after there is given up.
		uncovered, err := w.journal.Replay(l.from, nil)
		if err != nil {
			return *l, fmt.Errorf("read the journal: %w", err)
		}
		uncovered.To = min(uncovered.To, l.Known.Position)
		given = uncovered
	case l.Forked: // the store's chain stands for the member's: none of the member's may be left
		given = Span{From: 1, To: l.Known.Position}
	}
	accepted := *l
	lostBefore := len(w.lost)
	l.accepted, l.acceptedSpan, l.operator, l.Reason = true, given, operator, ""
	if !given.Empty() {
		w.lost = append(w.lost, given)
	}
	if w.journal != nil {
		// Before the acceptance moves the journal's head: a crash after it
		// resumes the recovery of what the journal holds.
		if err := w.markRecovery(l); err != nil {
			return accepted, err
		}
		if l.Forked && head.Position > l.from.Position {
			// The store's records after l.from stand for the member's own
			// from now on: journaled as one unit of its chain, so that the
			// member's units they were written over are no longer taken
			// for its chain (chainUnits) when a later loss is judged.
			err := w.journal.Append(JournalEntry{Kind: JournalBatch, Head: head, First: l.from.Position + 1, Action: OutcomeLossAccepted, Time: e.journalTime()})
			if err != nil {
				return accepted, err
			}
		}
	}
	e.rebase(head)
	err = w.update(ctx, &Reads{}, func() {
		r := AuditRecord{Time: e.opts.Now().UTC(), Outcome: OutcomeLossAccepted, Reason: why, Operator: operator}
		e.appendAudit(&r)
	}, nil, nil)
	if err != nil {
		if w.journal == nil {
			// Nothing recorded the acceptance: it is asked for again, not
			// taken for one (a recovery from a journal there is none of).
			l.accepted, l.acceptedSpan, l.operator = false, Span{}, ""
			w.lost = w.lost[:lostBefore]
			e.setLoss(l)
			return accepted, err
		}
		// The acceptance stands (the journal's start marker says so); the
		// recovery record names it when the recovery is done.
		e.setLoss(l)
		return accepted, fmt.Errorf("%w: %w", ErrRecoveryRetried, err)
	}
	e.lossMu.Lock()
	e.lossStats.Accepted++
	e.lossMu.Unlock()
	e.log.Warn("an operator accepted a store loss", "operator", operator, "store", l.Store, "member", l.Member, "lost", gone.String())
	if w.journal == nil {
		e.setLoss(nil)
		return accepted, nil
	}
	l.Forked = false
	e.setLoss(l)
	if err := w.replayJournal(ctx, l); err != nil {
		var failed *StoreLoss
		if errors.As(err, &failed) {
			err = errors.New(failed.Reason) // not the loss itself, which would ask for an acceptance again
		}
		return accepted, fmt.Errorf("%w: %w", ErrRecoveryRetried, err)
	}
	return accepted, nil
}

// ErrRecoveryRetried is returned by AcceptLoss when the acceptance is
// recorded but deciding again what the journal holds failed: the member
// tries again with its next batch or check (a `run` not running, at its
// next start), and stays stopped until it succeeds.
var ErrRecoveryRetried = errors.New("replayguard: the loss is accepted, but the recovery of what the journal holds failed; it is tried again with the member's next batch (or at its next start)")

// ErrNoLoss is returned by AcceptLoss when no store loss stops the member.
var ErrNoLoss = errors.New("replayguard: no store loss to accept: the store holds every commit this member made")

// ErrLossCovered is returned by AcceptLoss for a loss the journal holds
// whole, or one already accepted: there is nothing for an operator to
// accept.
var ErrLossCovered = errors.New("replayguard: nothing to accept")

// How a delivery decided again from the journal was first decided
// (Message.recovery).
const (
	recoveredHeld    = 1 // first held, or a duplicate: the window rules apply as to any delivery
	recoveredApplied = 2 // first applied: acknowledged as genuine, so the below-window and old-epoch rules are waived
	recoveredStale   = 3 // in a batch older than window.ttl: the window rules apply, and it is held where it would be applied
)
