package engine

import (
	"context"
	"fmt"
	"strings"
)

// recoverLoss decides the lost batches again from the journal on the
// store, whose head is head, when the journal holds all of them (or an
// operator accepted what it does not); audits the recovery and clears the
// loss. Otherwise, or when recovery fails, it returns the loss: the member
// stays stopped. Called with e.mu held.
func (w *sharedWindows) recoverLoss(ctx context.Context, l *StoreLoss, head AuditHead) error {
	e := w.e
	if !l.Forked {
		// A store that came back with everything (a failback to the old
		// primary) has lost nothing any more. A recovery's batches already
		// written there would make it hold another record at l.Known.
		if again, err := e.compare(ctx, head, l.Known); err == nil && again == nil {
			if l.marked {
				if err := w.journal.Append(JournalEntry{Kind: JournalRecoveryDone, Head: head, Time: e.journalTime()}); err != nil {
					return e.recoveryFailed(l, err)
				}
			}
			e.log.Info("the store holds this member's commits again: nothing to recover", "store", l.Store, "member", l.Member)
			e.rebase(head)
			e.setLoss(nil)
			return nil
		}
	}
	if head.Position < l.from.Position || (head.Position == l.from.Position && head.Hash != l.from.Hash) {
		// The store fell back further (a second failover before the
		// recovery was done): everything after its new head is lost.
		l.from, l.Head = head, head
		l.Lost.From = head.Position + 1
		l.Uncovered, l.accepted = Span{}, false // an acceptance named positions of the first loss only
		if l.marked {
			// The journal's start of this recovery names the old head: a
			// restart would resume from there, take the store's head on the
			// recovered chain for it, and decide nothing lost before it.
			// The new start is written now, so that a failback can still
			// close it.
			l.marked = false
			if err := w.markRecovery(l); err != nil {
				return e.recoveryFailed(l, err)
			}
		}
	}
	if w.journal == nil {
		l.Uncovered = l.Lost
	}
	if !l.accepted && (l.Forked || !l.Uncovered.Empty()) {
		e.setLoss(l)
		return l
	}
	if !l.accepted {
		uncovered, err := w.journal.Replay(l.from, nil)
		if err != nil {
			return e.recoveryFailed(l, err)
		}
		uncovered.To = min(uncovered.To, l.Lost.To)
		if !uncovered.Empty() {
			l.Uncovered = uncovered
			e.setLoss(l)
			e.log.Error("the journal does not hold every lost position: an operator must accept the loss of the rest",
				"store", l.Store, "member", l.Member, "uncovered", uncovered.String(), "lost", l.Lost.String())
			return l
		}
	}
	e.rebase(head)
	return w.replayJournal(ctx, l)
}

// staleBatch returns whether a journaled batch is older than window.ttl by
// the clock the group's keys age by, now: where the store reads its
// server's clock, whether the stamp of the batch's keys (KeyTime) is
// below the group's key cutoff, so that a step of this member's wall
// clock between the commit and the recovery changes nothing (a step
// forward would hold a batch a moment old; a step back would apply again a
// batch whose keys, and those of a replay another member applied since,
// have left the window), and a step of the server's clock ages it as it
// ages the keys. A batch journaled without its keys' stamp (written
// before entries carried it), or on a store that reads no server clock, is
// judged by the member's wall clock, as such a store ages its keys.
// Called with e.mu held.
func (e *Engine) staleBatch() func(JournalEntry) bool {
	oldest := e.opts.Now().Add(-e.ttl)
	if e.group == nil {
		return func(je JournalEntry) bool { return je.Time.Before(oldest) }
	}
	_, cutoff := e.readGroupClock()
	return func(je JournalEntry) bool {
		if je.KeyTime.IsZero() {
			return je.Time.Before(oldest)
		}
		return je.KeyTime.UnixNano() < cutoff
	}
}

// markRecovery writes, once per loss, the journal's record that a recovery
// began: until its end is written, a restart resumes it, and the journal
// keeps every segment.
func (w *sharedWindows) markRecovery(l *StoreLoss) error {
	if l.marked {
		return nil
	}
	m := JournalEntry{Kind: JournalRecoveryStart, Head: l.from, Lost: l.Known, Time: w.e.journalTime()}
	if l.accepted {
		m.Action = OutcomeLossAccepted
	}
	if err := w.journal.Append(m); err != nil {
		return err
	}
	l.marked = true
	return nil
}

// replayJournal decides again every batch the journal holds after l.from,
// on the store at the engine's head, then audits the recovery. Called with
// e.mu held.
func (w *sharedWindows) replayJournal(ctx context.Context, l *StoreLoss) error {
	e := w.e
	if err := w.markRecovery(l); err != nil {
		return e.recoveryFailed(l, err)
	}
	settled, err := w.settled(ctx, l.from)
	if err != nil {
		return e.recoveryFailed(l, err)
	}
	var n, stale, before int
	var outcomes [numOutcomes]int
	var actions []string
	first := e.tail.Position + 1
	aged := e.staleBatch()
	_, err = w.journal.Replay(l.from, func(je JournalEntry) error {
		done := settled[je.Head] // its first deliveries the store holds a decision of
		switch {
		case len(je.Messages) == 0:
			if je.Action != OutcomeRecovered && je.Action != OutcomeLossAccepted {
				actions = append(actions, je.Action) // an operator's: not a delivery to decide again
			}
			return nil
		case done >= len(je.Messages):
			before += len(je.Messages)
			return nil
		}
		before += done
		old := aged(je)
		if old {
			// Its keys may have left the key window: applying it again could
			// apply a copy the store does hold (a replay another member
			// applied meanwhile, whose key has left it too). Held, what is
			// not a duplicate is not lost.
			stale += len(je.Messages) - done
			e.log.Error("a lost batch is older than window.ttl: decided again, each delivery held where it would be applied", "first", je.First, "last", je.Head.Position,
				"time", je.Time, "key_time", je.KeyTime)
		}
		for i := range je.Messages {
			je.Messages[i].recovery = recoveredHeld
			switch {
			case old:
				je.Messages[i].recovery = recoveredStale
			case i < len(je.Effective) && je.Effective[i]:
				je.Messages[i].recovery = recoveredApplied
			}
		}
		w.redeciding = je.Head
		out, err := w.decideBatch(ctx, je.Messages[done:])
		w.redeciding = AuditHead{}
		if err != nil {
			return err
		}
		n += len(out)
		for _, d := range out {
			outcomes[d.Outcome]++
		}
		return nil
	})
	if err != nil {
		return e.recoveryFailed(l, err)
	}
	what := fmt.Sprintf("the %s store lost positions %s of member %q's chain (its head was %d, the member had committed up to %d); %d deliveries decided again from the journal at positions %s: %d applied, %d applied late, %d duplicate, %d held",
		l.Store, l.Lost, l.Member, l.Head.Position, l.Known.Position, n, Span{From: first, To: e.tail.Position},
		outcomes[Applied], outcomes[AppliedLate], outcomes[Duplicate], outcomes[Conflict]+outcomes[Quarantined]+outcomes[Malformed])
	if before > 0 {
		what += fmt.Sprintf("; %d deliveries of the journal the store already holds a decision of (made by an attempt of this recovery that was cut short, or first committed and kept by the store it failed over to) were not decided again", before)
	}
	if len(actions) > 0 {
		what += fmt.Sprintf("; %d lost operator actions (%s) are not deliveries and were not redone: do them again", len(actions), strings.Join(actions, ", "))
	}
	if stale > 0 {
		what += fmt.Sprintf("; %d deliveries were in batches older than window.ttl (their keys may have left the window): none of them applied, those not found duplicate held in quarantine", stale)
	}
	if l.accepted {
		what += "; " + l.acceptance()
	}
	err = w.update(ctx, &Reads{}, func() {
		r := AuditRecord{Time: e.opts.Now().UTC(), Outcome: OutcomeRecovered, Reason: what}
		e.appendAudit(&r)
	}, nil, nil)
	if err == nil {
		err = w.journal.Append(JournalEntry{Kind: JournalRecoveryDone, Head: e.tail, Time: e.journalTime()})
	}
	if err != nil {
		return e.recoveryFailed(l, err)
	}
	e.setLoss(nil)
	e.log.Info("recovered what the store lost from the journal; deciding again", "store", l.Store, "member", l.Member,
		"lost", l.Lost.String(), "deliveries", n, "applied", outcomes[Applied]+outcomes[AppliedLate], "duplicate", outcomes[Duplicate])
	return nil
}

// settled returns, for the batches the journal holds after from, how
// many of each one's first deliveries a recovery must not decide again, as
// the store holds a decision of them (all of a batch's, or none when it
// is not named):
//   - a lost batch an earlier attempt of a recovery decided again
//     (JournalEntry.Redecides) on the store as it is now, which was cut
//     short before its end (the store failed again, the member was
//     killed): all of it, or, when that attempt decided it in parts
//     (decideHalves) and the store holds only the first of them, the
//     deliveries those parts decided. Parts commit in order, each after
//     every one before it, so they are the lost batch's first deliveries,
//     and the rest is decided again;
//   - each such decision made again, unless its lost batch is neither
//     decided again now nor held by the store (a later loss took it away:
//     it is then the only decision there is);
//   - a batch the store holds as it was first committed (a standby ahead
//     of the recovery's start).
//
// Called with e.mu held, the engine's tail at the store's head.
func (w *sharedWindows) settled(ctx context.Context, from AuditHead) (map[AuditHead]int, error) {
	e := w.e
	inRange := map[AuditHead]bool{}
	sizes := map[AuditHead]int{} // the deliveries of each batch in range
	var batches []AuditHead
	var again [][2]AuditHead // a batch decided again, and the lost batch it decided
	if _, err := w.journal.Replay(from, func(je JournalEntry) error {
		inRange[je.Head] = true
		sizes[je.Head] = len(je.Messages)
		batches = append(batches, je.Head)
		if je.Redecides.Position > 0 {
			again = append(again, [2]AuditHead{je.Head, je.Redecides})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	settled := map[AuditHead]int{}
	settle := func(h AuditHead) { settled[h] = sizes[h] }
	type link struct{ same, archived bool }
	links := map[AuditHead]link{}
	read := func(h AuditHead) (link, error) {
		if h.Position == 0 || h.Position > e.tail.Position || e.caps.Chains == nil {
			return link{}, nil
		}
		if v, ok := links[h]; ok {
			return v, nil
		}
		l, archived, err := ChainLink(ctx, e.caps.Chains, e.caps.Keeper, e.member, h.Position)
		if err != nil {
			return link{}, fmt.Errorf("read the store's chain to resume a recovery: %w", err)
		}
		links[h] = link{same: l == h, archived: archived}
		return links[h], nil
	}
	held := func(h AuditHead) (bool, error) {
		l, err := read(h)
		return l.same || l.archived, err
	}
	// A batch in the range the store holds as it was committed: the store
	// failed over to a standby ahead of the recovery's start (one that had
	// received more of the old primary's commits than the first one
	// promoted). Its chain holds it at its position with its hash, so its
	// deliveries are decided there already. Only positions up to the
	// store's head are read: a store behind the journal costs nothing.
	// An archived position is not taken for one: the store cannot show
	// which record it held there.
	for _, h := range batches {
		l, err := read(h)
		if err != nil {
			return nil, err
		}
		if l.same {
			settle(h)
		}
	}
	parts := map[AuditHead]int{} // of each lost batch, the deliveries its parts the store holds decided
	for _, a := range again {
		redone, lost := a[0], a[1]
		ok, err := held(redone)
		if err != nil {
			return nil, err
		}
		if ok {
			settle(redone)
			parts[lost] += sizes[redone]
			continue
		}
		if inRange[lost] {
			settle(redone) // what the store does not hold of its lost batch is decided now (or held)
			continue
		}
		if ok, err = held(lost); err != nil {
			return nil, err
		}
		if ok {
			settle(redone)
		}
	}
	for lost, n := range parts {
		if inRange[lost] {
			settled[lost] = min(max(settled[lost], n), sizes[lost])
		}
	}
	return settled, nil
}

// rebase makes head the engine's committed head: the member's chain
// continues from the store's. Called with e.mu held.
func (e *Engine) rebase(head AuditHead) {
	e.headMu.Lock()
	e.head = head
	e.headMu.Unlock()
	e.tail = head
	e.resetPending()
}

// recoveryFailed keeps the loss with why recovery stopped; the next batch
// or check tries again.
func (e *Engine) recoveryFailed(l *StoreLoss, err error) error {
	l.Reason = err.Error()
	e.setLoss(l)
	e.log.Error("recovery from the journal failed; trying again with the next batch", "store", l.Store, "member", l.Member, "err", err)
	return l
}
