package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// update has the shared store read r's rows, fills the pending batch by
// deciding on them (fill) and has the store write it, then journals the
// batch with the deliveries it decided (msgs, and decided, which fill
// fills with their decisions; both nil for an operator's action). Called
// with e.mu held.
func (w *sharedWindows) update(ctx context.Context, r *Reads, fill func(), msgs []Message, decided []Decision) error {
	return w.updateWith(ctx, r, func(*Rows) { fill() }, func() ([]Message, []Decision) { return msgs, decided })
}

// updateWith is update with a fill that sees the rows read (their Held),
// and the deliveries to journal, with their decisions, asked of
// journaled once the batch is committed.
func (w *sharedWindows) updateWith(ctx context.Context, r *Reads, fill func(*Rows), journaled func() ([]Message, []Decision)) error {
	e := w.e
	defer func() { e.unread = nil }()
	start := e.tail
	var b *Batch
	var err error
	defer e.commitStarted()()
	if e.heldFind != nil {
		e.heldFind.begin(ctx)
		defer e.heldFind.end()
	}
	for round := 0; ; round++ {
		err = w.store.Update(ctx, r, func(rows *Rows) (*Batch, error) {
			e.tail = start // a retry decides the batch again from the same chain head
			e.resetPending()
			e.unackedTaken = nil
			e.clearHeld() // the entries of an earlier decide were never written
			e.loadRows(rows, r.KeyCutoff)
			if e.unread != nil {
				e.unread.start()
			}
			fill(rows)
			if e.heldFind != nil && e.heldFind.err != nil {
				return nil, e.heldFind.err
			}
			if e.unread != nil && e.unread.missed() {
				return nil, ErrReadAgain
			}
			b = e.takeBatch()
			return b, nil
		})
		if !errors.Is(err, ErrReadAgain) {
			break
		}
		e.tail = start
		e.resetPending()
		if round+1 == maxReadRounds {
			err = fmt.Errorf("%w: the batch's rows kept changing through %d reads", ErrContention, maxReadRounds)
			break
		}
		e.unread.widen(r)
	}
	e.refused = nil
	if err != nil {
		// Whether a failed write reached the store may be unknown: the
		// chain head is read again before the next batch.
		e.tail = start
		e.resetPending()
		e.reload.Store(true)
		e.unackedTaken = nil
		return err
	}
	e.headMu.Lock()
	e.head = e.tail
	e.headMu.Unlock()
	e.takeUnacked()
	msgs, decided := journaled()
	jerr := w.journalBatch(b, msgs, decided)
	if len(msgs) > 0 && msgs[0].recovery != 0 { // before the observer counts the batch's decisions: see LossStats
		e.lossMu.Lock()
		e.lossStats.Recovered += uint64(len(msgs))
		e.lossMu.Unlock()
	}
	e.observe(b)
	return jerr
}

// journalBatch appends a committed batch to the journal. Its deliveries
// are not acknowledged when it fails (only what the journal holds is):
// the caller passes them again, and they keep their decisions once the
// entry is appended (errNotJournaled).
func (w *sharedWindows) journalBatch(b *Batch, msgs []Message, decided []Decision) error {
	e := w.e
	if w.journal == nil || len(b.Audit) == 0 {
		return nil
	}
	je := JournalEntry{Kind: JournalBatch, Head: e.tail, First: b.Audit[0].Position, Time: e.journalTime(), Messages: msgs}
	if e.group != nil {
		je.KeyTime = time.Unix(0, e.keyStamp).UTC() // the stamp of the batch's keys
	}
	if len(msgs) == 0 {
		je.Action = b.Audit[0].Outcome
		if len(b.Resolved) > 0 && je.Action != OutcomeDiscarded { // a release: its record has the outcome of deciding the message again
			je.Action = OutcomeReleased
		}
	}
	if len(msgs) > 0 && msgs[0].recovery != 0 {
		je.Redecides = w.redeciding
	}
	if len(decided) > 0 {
		je.Effective = make([]bool, len(decided))
		for i := range decided {
			je.Effective[i] = decided[i].Outcome.Effective()
		}
	}
	if err := w.journal.Append(je); err != nil {
		e.log.Error("journal append failed: the batch is committed but not acknowledged", "err", err)
		w.unjournaled = &je
		return errNotJournaled{err}
	}
	return nil
}

// loadRows makes the rows read for one batch the engine's whole window
// state, so that the batch is decided by the same code as on a
// single-owner store. Key ordinals continue from the member's last, and
// are at least the key clock's stamp in nanoseconds: the group's keys are
// ordered by when they were applied.
//
// The key window holds every key read and every key the batch applies,
// however many: window.max_entries bounds the group's key table, which the
// store prunes (the newest kept), not the rows of one batch. A key evicted
// while its batch is decided would be decided again as new against a row
// the store holds: a replay read as stored, or one of the batch's own
// keys, applied a second time or failing the batch on every retry.
func (e *Engine) loadRows(rows *Rows, cutoff int64) {
	t := e.opts.Now().UnixNano()
	if e.group != nil {
		t = e.keyStamp
	}
	next := max(e.keys.next, uint64(max(t, 0)))
	e.keys = newKeyWindow(math.MaxInt, next)
	e.keys.reserve(len(rows.Keys))
	for _, k := range rows.Keys {
		if k.Time >= cutoff {
			e.keys.add(k.Key, k.Digest, k.Time, k.Ordinal)
		}
	}
	clear(e.sources)
	for i := range rows.Sources {
		s := rows.Sources[i].clone()
		e.sources[s.ID()] = &s
	}
	clear(e.entities)
	for _, st := range rows.Entities {
		e.entities[st.Name] = entityFromState(st)
	}
	e.refused = rows.Refused
}
