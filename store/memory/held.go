package memory

import (
	"context"

	"github.com/replayguard/replayguard/engine"
)

// heldIndex is the index of open quarantine entries by the key and
// content of the message each holds (engine.HeldFinder): ids by
// (QuarantineEntry.Key, QuarantineEntry.Content). An entry without both
// is not in it.
type heldIndex map[heldKey]map[uint64]struct{}

type heldKey struct {
	key     string
	content engine.Hash
}

// add indexes q.
func (x heldIndex) add(q engine.QuarantineEntry) {
	if q.Key == "" || q.Content.IsZero() {
		return
	}
	k := heldKey{q.Key, q.Content}
	if x[k] == nil {
		x[k] = map[uint64]struct{}{}
	}
	x[k][q.ID] = struct{}{}
}

// remove takes q out of the index.
func (x heldIndex) remove(q engine.QuarantineEntry) {
	k := heldKey{q.Key, q.Content}
	delete(x[k], q.ID)
	if len(x[k]) == 0 {
		delete(x, k)
	}
}

// find returns the lowest id indexed under key and content.
func (x heldIndex) find(key, content engine.Hash) (uint64, bool) {
	var low uint64
	found := false
	for id := range x[heldKey{key.String(), content}] {
		if !found || id < low {
			low, found = id, true
		}
	}
	return low, found
}

// rebuild indexes every entry of quarantine.
func rebuildHeld(quarantine map[uint64]engine.QuarantineEntry) heldIndex {
	x := heldIndex{}
	for _, q := range quarantine {
		x.add(q)
	}
	return x
}

// FindHeld returns the lowest id of the open entries holding a message of
// key and content.
func (s *Store) FindHeld(ctx context.Context, key, content engine.Hash) (uint64, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, false, engine.ErrClosed
	}
	id, ok := s.held.find(key, content)
	return id, ok, nil
}

// FindHeld returns the lowest id of the group's open entries holding a
// message of key and content. It takes the index's own lock, not the
// group's: the engine calls it from inside Update's decide.
func (m *Member) FindHeld(ctx context.Context, key, content engine.Hash) (uint64, bool, error) {
	m.g.heldMu.Lock()
	defer m.g.heldMu.Unlock()
	id, ok := m.g.held.find(key, content)
	return id, ok, nil
}

// heldOpen reports whether every entry ids names is open. Called with
// g.mu held.
func (g *Group) heldOpen(ids []uint64) bool {
	for _, id := range ids {
		if _, ok := g.quarantine[id]; !ok {
			return false
		}
	}
	return true
}
