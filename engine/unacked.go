package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// reasonUnackedHeld is why a delivery that this member held in a commit it
// never acknowledged, delivered again, is a duplicate: the entry that holds
// it stays the one an operator releases or discards.
const reasonUnackedHeld = "delivered again: held in quarantine as #%d by this member's commit at position %d, which it never acknowledged (its journal did not take the batch); the entry holds it, one to release or discard"

// reasonLastHeld is reasonUnackedHeld for a delivery of the member's last
// journaled batch before it started again, which it journals before it
// acknowledges.
const reasonLastHeld = "delivered again: held in quarantine as #%d by this member's commit at position %d, the last its journal took before the member started again, whose acknowledgement may not have reached the broker; the entry holds it, one to release or discard"

// unackedHeld is an open quarantine entry that holds a delivery of a
// commit this member may not have acknowledged.
type unackedHeld struct {
	id        uint64 // the entry
	position  uint64 // the record of the decision that held it
	journaled bool   // the commit is the journal's last batch
}

// heldContent identifies a delivery by its topic and payload bytes, as a
// broker delivers it again.
func heldContent(topic string, payload []byte) Hash {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(topic)))
	h.Write(n[:])
	h.Write([]byte(topic))
	binary.BigEndian.PutUint64(n[:], uint64(len(payload)))
	h.Write(n[:])
	h.Write(payload)
	var out Hash
	h.Sum(out[:0])
	return out
}

// noteUnacked reads this member's records after known, the head its
// journal holds, up to head, the store's: commits whose journal append
// never happened (the member was killed between the commit and the
// append, or a commit whose answer was lost landed after all). None of
// their deliveries was acknowledged, so the broker delivers them again.
// A delivery such a commit applied is then a duplicate by its key; one it
// held has no key in the window, and would be held a second time: its
// open entry is noted here, and its next delivery is a duplicate of it
// (decideOne). Called with e.mu held, before the engine takes head.
func (w *sharedWindows) noteUnacked(ctx context.Context, head, known AuditHead) error {
	e := w.e
	if w.journal == nil || known.Position == 0 || head.Position <= known.Position || e.caps.Chains == nil {
		return nil
	}
	var held []AuditRecord
	err := e.caps.Chains.ScanChain(ctx, e.member, known.Position+1, func(r AuditRecord) error {
		if r.Position > head.Position {
			return errStopScan
		}
		if o, ok := ParseOutcome(r.Outcome); ok && o.Held() && r.Ref == 0 {
			held = append(held, r)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return fmt.Errorf("read the commits this member never acknowledged: %w", err)
	}
	for _, r := range held {
		id := e.qbase + r.Position
		q, err := e.store.Quarantined(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			continue // released or discarded since: an operator decided it
		case err != nil:
			return fmt.Errorf("read quarantine entry #%d of a commit this member never acknowledged: %w", id, err)
		}
		e.noteHeld(q, unackedHeld{id: id, position: r.Position})
	}
	if len(held) > 0 {
		e.log.Warn("the store holds commits this member never acknowledged (its journal did not take them): what they held is held once, and delivered again is a duplicate of its entry",
			"member", e.member, "positions", Span{From: known.Position + 1, To: head.Position}.String(), "held", len(held))
	}
	return nil
}

var errStopScan = errors.New("stop")

// noteLastJournaled notes the open entries of the deliveries the
// journal's last batch held: the member journals a batch before it
// acknowledges it, so a member killed between the two (or whose
// acknowledgements its connection lost with it) is delivered the batch
// again when it starts. Called with e.mu held, once, as the member
// starts, on a store that holds the journal's head.
func (w *sharedWindows) noteLastJournaled(ctx context.Context) error {
	e := w.e
	if w.journal == nil {
		return nil
	}
	last, _ := w.journal.Last() // its head: Last need not read its deliveries
	if last.Head.Position == 0 {
		return nil
	}
	_, err := w.journal.Replay(AuditHead{Position: last.First - 1}, func(je JournalEntry) error {
		if je.Head == last.Head {
			last = je
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the journal's last batch: %w", err)
	}
	if last.Redecides.Position > 0 { // decided again from the journal: no broker delivers it again
		return nil
	}
	for i := range last.Messages {
		if i < len(last.Effective) && last.Effective[i] {
			continue // applied: delivered again, a duplicate by its key
		}
		m := &last.Messages[i]
		pos := last.First + uint64(i)
		q, err := e.store.Quarantined(ctx, e.qbase+pos)
		switch {
		case errors.Is(err, ErrNotFound):
			continue // a duplicate, or released or discarded since
		case err != nil:
			return fmt.Errorf("read quarantine entry #%d of the journal's last batch: %w", e.qbase+pos, err)
		}
		if q.Topic == m.Topic && bytes.Equal(q.Payload, m.Payload) {
			e.noteHeld(q, unackedHeld{id: e.qbase + pos, position: pos, journaled: true})
		}
	}
	return nil
}

// noteHeld makes a delivery with q's topic and payload, once, a
// duplicate of entry h. An entry noted before is not noted again: a
// reload after a second failed commit reads again, from the same journal
// head, the commits the first reload read, and an entry noted twice would
// take two deliveries, the second one held by no entry.
func (e *Engine) noteHeld(q QuarantineEntry, h unackedHeld) {
	if e.unackedNoted[h.id] {
		return
	}
	if e.unackedNoted == nil {
		e.unackedNoted = map[uint64]bool{}
	}
	e.unackedNoted[h.id] = true
	if e.unacked == nil {
		e.unacked = map[Hash][]unackedHeld{}
	}
	c := heldContent(q.Topic, q.Payload)
	e.unacked[c] = append(e.unacked[c], h)
}

// redeliveredHeld returns the entry that holds m, when m is a delivery
// again of one a commit this member never acknowledged held, and the
// batch being decided has not yet taken that entry for another copy.
func (e *Engine) redeliveredHeld(m *Message) (unackedHeld, bool) {
	c := heldContent(m.Topic, m.Payload)
	refs := e.unacked[c]
	n := e.unackedTaken[c]
	if n >= len(refs) {
		return unackedHeld{}, false
	}
	// The journal's last batch may have been acknowledged before the
	// member stopped: only a delivery its transport sends again (the MQTT
	// DUP flag, JetStream's delivery count) is taken for that batch's,
	// never the same bytes published anew, which are decided as any
	// delivery. A transport that does not flag what it sends again has
	// the message held a second time, under an entry of its own.
	if refs[n].journaled && !m.Dup {
		return unackedHeld{}, false
	}
	if e.unackedTaken == nil {
		e.unackedTaken = map[Hash]int{}
	}
	e.unackedTaken[c] = n + 1
	return refs[n], true
}

// takeUnacked forgets the entries the batch just committed took: each
// holds one delivery, found a duplicate once.
func (e *Engine) takeUnacked() {
	for c, n := range e.unackedTaken {
		if rest := e.unacked[c][n:]; len(rest) > 0 {
			e.unacked[c] = rest
		} else {
			delete(e.unacked, c)
		}
	}
	e.unackedTaken = nil
}

// forgetUnacked forgets entry id, released or discarded on this member:
// it holds no delivery any more, and a delivery of its message after it is
// decided as any other. Called with e.mu held.
func (e *Engine) forgetUnacked(id uint64) {
	for c, refs := range e.unacked {
		i := slices.IndexFunc(refs, func(h unackedHeld) bool { return h.id == id })
		if i < 0 {
			continue
		}
		if refs = slices.Delete(refs, i, i+1); len(refs) > 0 {
			e.unacked[c] = refs
		} else {
			delete(e.unacked, c)
		}
		return
	}
}

// unackedDuplicate is the decision of a delivery again of one held as
// q: a duplicate, as decoded as it can be.
func unackedDuplicate(d *Delivery, decodeErr error, topic string, q unackedHeld) Decision {
	why := reasonUnackedHeld
	if q.journaled {
		why = reasonLastHeld
	}
	dec := Decision{Outcome: Duplicate, Sequence: -1, Reason: fmt.Sprintf(why, q.id, q.position)}
	switch {
	case d == nil:
	case decodeErr != nil:
		dec.Route = d.route.Name
		dec.Source, _ = d.malformedSource(topic)
	default:
		dec.Route, dec.Key, dec.Digest, dec.Source, dec.Epoch, dec.Sequence, dec.ID = d.route.Name, d.key, d.digest, d.source, d.epoch, d.seq, d.id
	}
	return dec
}
