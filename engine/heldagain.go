package engine

import (
	"context"
	"fmt"
)

// reasonHeldAgain is why a delivery again of a message an open quarantine
// entry holds is a duplicate: the entry stays the one an operator releases
// or discards, and releasing a second entry would apply the message twice.
const reasonHeldAgain = "delivered again: held in quarantine as #%d, an open entry of the same key and content; the entry holds it, one to release or discard"

// heldRef is what the quarantine's index of open entries is keyed by: the
// held message's idempotency key and its content (HeldContent).
type heldRef struct{ key, content Hash }

// HeldContent identifies a held message within its key: SHA-256 over its
// topic and its payload bytes, each length-prefixed, as a broker delivers
// it again. Two deliveries of one key and one content are the same
// message; a conflict (the key applied with other content) held again has
// the content it was held with, never the applied message's.
func HeldContent(topic string, payload []byte) Hash { return heldContent(topic, payload) }

// heldLookup finds, for the batch being decided, the open entries of the
// messages it would hold (Capabilities.Held). A lookup that fails fails
// the batch: nothing decided in it is committed.
type heldLookup struct {
	f   HeldFinder
	ctx context.Context // of the batch being decided; nil outside one
	err error           // the batch's first failed lookup
	// added are the entries held by batches this engine decided and may
	// not have committed yet (a single owner's), or by the batch being
	// decided (a member's): the store's index does not hold them yet.
	added map[heldRef]uint64
}

// begin starts the lookups of a batch.
func (l *heldLookup) begin(ctx context.Context) { l.ctx, l.err = ctx, nil }

// end returns the batch's first failed lookup.
func (l *heldLookup) end() error {
	err := l.err
	l.ctx, l.err = nil, nil
	return err
}

// heldAgain returns the open entry that holds m already, when m, which
// decision dec would hold, has a key: that entry is not one whose release
// or discard is being committed (acting), for a delivery decided on it
// would be recorded a duplicate of a message no entry holds any more. An
// entry the store holds is added to the batch's HeldOpen, which a shared
// store checks is still open when it writes the batch.
func (e *Engine) heldAgain(m *Message, dec *Decision) (uint64, bool) {
	l := e.heldFind
	if l == nil || dec.Key.IsZero() || l.err != nil {
		return 0, false
	}
	ref := heldRef{key: dec.Key, content: heldContent(m.Topic, m.Payload)}
	if id, ok := l.added[ref]; ok && !e.acting[id] {
		return id, true
	}
	if l.ctx == nil {
		l.err = fmt.Errorf("%w: a held entry was looked for outside a batch", ErrAborted)
		return 0, false
	}
	id, found, err := e.findHeld(l, ref)
	if err != nil {
		l.err = fmt.Errorf("find the open quarantine entry of key %s: %w", dec.Key, err)
		return 0, false
	}
	if !found || e.acting[id] {
		return 0, false
	}
	e.pending.batch.HeldOpen = append(e.pending.batch.HeldOpen, id)
	return id, true
}

// findHeld looks ref up in the store's index: in the read of the batch's
// rows, on a store that reads them one at a time, or after closing it
// when that read cannot (a second read beside it could wait for a commit
// that waits for the first).
func (e *Engine) findHeld(l *heldLookup, ref heldRef) (uint64, bool, error) {
	if r := e.rows; r != nil {
		if !r.read() {
			return 0, false, nil // the failed read fails the batch
		}
		if f, ok := r.tx.(HeldRowTx); ok {
			return f.FindHeld(ref.key, ref.content)
		}
		r.release()
	}
	return l.f.FindHeld(l.ctx, ref.key, ref.content)
}

// noteHeldEntry notes entry q, just added to the pending batch, as the
// one that holds its message, so that the same message delivered again
// before the store's index holds it (in the same batch, or in one decided
// while this one commits) is a duplicate of it. It returns q with its
// Content set.
func (e *Engine) noteHeldEntry(q QuarantineEntry, key Hash) QuarantineEntry {
	if key.IsZero() {
		return q
	}
	q.Content = heldContent(q.Topic, q.Payload)
	if l := e.heldFind; l != nil {
		ref := heldRef{key: key, content: q.Content}
		if _, ok := l.added[ref]; !ok {
			if l.added == nil {
				l.added = map[heldRef]uint64{}
			}
			l.added[ref] = q.ID
		}
	}
	return q
}

// forgetHeld forgets entry id, released or discarded: a delivery of its
// message after the commit is decided as any other. Called with e.mu held.
func (e *Engine) forgetHeld(id uint64) {
	if l := e.heldFind; l != nil {
		for ref, got := range l.added {
			if got == id {
				delete(l.added, ref)
			}
		}
	}
}

// clearHeld forgets the entries noted as added: the store's index holds
// every committed one, and those of a failed commit hold nothing.
func (e *Engine) clearHeld() {
	if l := e.heldFind; l != nil {
		clear(l.added)
	}
}

// heldDuplicate is the decision of a delivery again of a message entry id
// holds, which dec would have held a second time.
func heldDuplicate(dec Decision, id uint64) Decision {
	return Decision{Outcome: Duplicate, Reason: fmt.Sprintf(reasonHeldAgain, id), Route: dec.Route, Key: dec.Key,
		Digest: dec.Digest, Source: dec.Source, Epoch: dec.Epoch, Sequence: dec.Sequence, ID: dec.ID}
}
