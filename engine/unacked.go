package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// reasonUnackedHeld is why a delivery that this member held in a commit it
// never acknowledged, delivered again, is a duplicate: the entry that holds
// it stays the one an operator releases or discards.
const reasonUnackedHeld = "delivered again: held in quarantine as #%d by this member's commit at position %d, which it never acknowledged (its journal did not take the batch); the entry holds it, one to release or discard"

// unackedHeld is an open quarantine entry that holds a delivery of a
// commit this member never acknowledged.
type unackedHeld struct {
	id       uint64 // the entry
	position uint64 // the record of the decision that held it
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
		if e.unacked == nil {
			e.unacked = map[Hash][]unackedHeld{}
		}
		c := heldContent(q.Topic, q.Payload)
		e.unacked[c] = append(e.unacked[c], unackedHeld{id: id, position: r.Position})
	}
	if len(held) > 0 {
		e.log.Warn("the store holds commits this member never acknowledged (its journal did not take them): what they held is held once, and delivered again is a duplicate of its entry",
			"member", e.member, "positions", Span{From: known.Position + 1, To: head.Position}.String(), "held", len(held))
	}
	return nil
}

var errStopScan = errors.New("stop")

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

// unackedDuplicate is the decision of a delivery again of one held as
// q: a duplicate, as decoded as it can be.
func unackedDuplicate(d *Delivery, decodeErr error, topic string, q unackedHeld) Decision {
	dec := Decision{Outcome: Duplicate, Sequence: -1, Reason: fmt.Sprintf(reasonUnackedHeld, q.id, q.position)}
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
