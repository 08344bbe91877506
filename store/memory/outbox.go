package memory

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/replayguard/replayguard/engine"
)

var (
	_ engine.OutboxStore = (*Store)(nil)
	_ engine.OutboxStore = (*Member)(nil)
)

// outbox is one member's outbox: the pending entries, in ID order, and
// the held ones. Its entries are copies nobody else holds.
type outbox struct {
	pending map[uint64]engine.OutboxEntry
	order   []uint64 // pending IDs ascending, with some since removed: dropped lazily
	held    map[uint64]engine.HeldEntry
}

func newOutbox() *outbox {
	return &outbox{pending: map[uint64]engine.OutboxEntry{}, held: map[uint64]engine.HeldEntry{}}
}

// add appends a batch's entries, which engine.CheckOutbox found ascending
// and above every ID written before.
func (o *outbox) add(es []engine.OutboxEntry) {
	for _, e := range es {
		o.pending[e.ID] = copyOutboxEntry(e)
		o.order = append(o.order, e.ID)
	}
}

// hold moves a pending entry to the held ones; one not pending is left alone.
func (o *outbox) hold(member string, h engine.OutboxHold) {
	e, ok := o.pending[h.ID]
	if !ok {
		return
	}
	delete(o.pending, h.ID)
	o.held[h.ID] = engine.HeldEntry{OutboxEntry: e, Member: member, Reason: h.Reason}
	o.compact()
}

// checkResolved refuses resolutions of entries that are not held.
func (o *outbox) checkResolved(member string, rs []engine.OutboxResolve) error {
	for _, r := range rs {
		if o == nil || !o.isHeld(r.ID) {
			return fmt.Errorf("%w: outbox entry %d of member %q is not held; nothing written", engine.ErrNotFound, r.ID, member)
		}
	}
	return nil
}

// checkHeld refuses an operator's hold (Pending) of an entry that is no
// longer pending: the drainer delivered it since the operator read it.
func (o *outbox) checkHeld(h engine.OutboxHold) error {
	if !h.Pending {
		return nil
	}
	if o != nil {
		if _, ok := o.pending[h.ID]; ok {
			return nil
		}
	}
	return fmt.Errorf("%w: outbox entry %d of member %q is no longer pending (delivered meanwhile); nothing written", engine.ErrNotFound, h.ID, h.Member)
}

func (o *outbox) isHeld(id uint64) bool {
	_, ok := o.held[id]
	return ok
}

// resolve takes a held entry out of the held ones, back into the pending
// ones when r.Requeue; checkResolved found it held.
func (o *outbox) resolve(r engine.OutboxResolve) {
	h := o.held[r.ID]
	delete(o.held, r.ID)
	if !r.Requeue {
		return
	}
	o.pending[r.ID] = h.OutboxEntry
	if i, found := slices.BinarySearch(o.order, r.ID); !found { // a removed ID may linger in order
		o.order = slices.Insert(o.order, i, r.ID)
	}
}

func (o *outbox) done(ids []uint64) {
	for _, id := range ids {
		delete(o.pending, id)
	}
	o.compact()
}

// compact drops removed IDs from order once they are half of it.
func (o *outbox) compact() {
	if len(o.order) < 2*len(o.pending)+16 {
		return
	}
	o.order = slices.DeleteFunc(o.order, func(id uint64) bool { _, ok := o.pending[id]; return !ok })
}

// list returns copies of up to limit pending entries with ID > after.
func (o *outbox) list(after uint64, limit int) []engine.OutboxEntry {
	i, _ := slices.BinarySearch(o.order, after+1)
	var out []engine.OutboxEntry
	for ; i < len(o.order) && len(out) < limit; i++ {
		if e, ok := o.pending[o.order[i]]; ok {
			out = append(out, copyOutboxEntry(e))
		}
	}
	return out
}

// heldEntries returns copies of the held entries in ID order.
func (o *outbox) heldEntries() []engine.HeldEntry {
	out := make([]engine.HeldEntry, 0, len(o.held))
	for _, id := range slices.Sorted(maps.Keys(o.held)) {
		h := o.held[id]
		h.OutboxEntry = copyOutboxEntry(h.OutboxEntry)
		out = append(out, h)
	}
	return out
}

func copyOutboxEntry(e engine.OutboxEntry) engine.OutboxEntry {
	e.Source = slices.Clone(e.Source)
	e.Payload = slices.Clone(e.Payload)
	return e
}

// checkLimit refuses a listing of no entries.
func checkLimit(limit int) error {
	if limit < 1 {
		return fmt.Errorf("memory: outbox limit %d is below 1", limit)
	}
	return nil
}

// checkOutbox checks a single-owner store's batch: its entries, and holds
// of its one outbox, whose member is "".
func checkOutbox(b *engine.Batch) error {
	if err := engine.CheckOutbox(b); err != nil {
		return err
	}
	for _, h := range b.OutboxHeld {
		if h.Member != "" {
			return fmt.Errorf("memory: a hold of entry %d names member %q: this store keeps one outbox, member \"\"", h.ID, h.Member)
		}
	}
	for _, r := range b.OutboxResolved {
		if r.Member != "" {
			return fmt.Errorf("memory: a resolution of entry %d names member %q: this store keeps one outbox, member \"\"", r.ID, r.Member)
		}
	}
	return nil
}

// singleOwner refuses a member other than "" on a single-owner store.
func singleOwner(member string) error {
	if member != "" {
		return fmt.Errorf("memory: outbox of member %q: this store keeps one outbox, member \"\"", member)
	}
	return nil
}

// Outbox returns up to limit pending entries with ID > after, in ID
// order; member must be "".
func (s *Store) Outbox(ctx context.Context, member string, after uint64, limit int) ([]engine.OutboxEntry, error) {
	if err := cmp.Or(singleOwner(member), checkLimit(limit)); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, engine.ErrClosed
	}
	return s.outbox.list(after, limit), nil
}

// OutboxDone removes delivered entries; IDs no longer pending are ignored.
func (s *Store) OutboxDone(ctx context.Context, member string, ids []uint64) error {
	if err := singleOwner(member); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return engine.ErrClosed
	}
	s.outbox.done(ids)
	return nil
}

// OutboxDepth counts the pending entries; member must be "".
func (s *Store) OutboxDepth(ctx context.Context, member string) (int, error) {
	if err := singleOwner(member); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, engine.ErrClosed
	}
	return len(s.outbox.pending), nil
}

// OutboxHeld returns the held entries in ID order.
func (s *Store) OutboxHeld(ctx context.Context) ([]engine.HeldEntry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, engine.ErrClosed
	}
	return s.outbox.heldEntries(), nil
}
