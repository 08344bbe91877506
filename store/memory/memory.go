package memory

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/replayguard/replayguard/engine"
)

// Store keeps the engine's state in maps and slices. The zero value is not
// usable; call New.
type Store struct {
	mu         sync.RWMutex
	closed     bool
	keys       []engine.KeyEntry // ordinal ascending
	sources    map[string]engine.SourceState
	entities   map[string]engine.EntityState
	audit      auditLog
	head       engine.AuditHead
	base       engine.AuditHead // the last record audit retention dropped
	nextKey    uint64
	quarantine map[uint64]engine.QuarantineEntry // entries are replaced, never changed in place
	held       heldIndex                         // the open entries by key and content
	cursors    map[string]uint64                 // audit sinks' cursors
	outbox     *outbox
	routes     map[string][]byte // route name → its key derivation
	marks      map[string]engine.StreamMark
}

var (
	_ engine.Store             = (*Store)(nil)
	_ engine.AuditScanner      = (*Store)(nil)
	_ engine.QuarantineScanner = (*Store)(nil)
	_ engine.AuditTrimmer      = (*Store)(nil)
)

// Capabilities declares a single-owner store with audit retention, sink
// cursors and an outbox.
func (s *Store) Capabilities() engine.Capabilities {
	return engine.Capabilities{Trim: s, Cursors: s, Outbox: s, Routes: s, Marks: s, Held: s}
}

// New returns an empty store.
func New() *Store {
	return &Store{
		sources:    map[string]engine.SourceState{},
		entities:   map[string]engine.EntityState{},
		quarantine: map[uint64]engine.QuarantineEntry{},
		held:       heldIndex{},
		outbox:     newOutbox(),
	}
}

// Load returns a copy of everything the store holds.
func (s *Store) Load(ctx context.Context) (*engine.Snapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, engine.ErrClosed
	}
	snap := &engine.Snapshot{
		Keys:      slices.Clone(s.keys),
		Sources:   make([]engine.SourceState, 0, len(s.sources)),
		Entities:  make([]engine.EntityState, 0, len(s.entities)),
		AuditHead: s.head,
		NextKey:   s.nextKey,
	}
	for _, src := range s.sources {
		snap.Sources = append(snap.Sources, copySource(src))
	}
	for _, e := range s.entities {
		snap.Entities = append(snap.Entities, copyEntity(e))
	}
	return snap, nil
}

// Commit applies the batch. Everything is checked before anything changes,
// so an error leaves the store as it was.
func (s *Store) Commit(ctx context.Context, b *engine.Batch) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: commit: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return engine.ErrClosed
	}
	head, err := engine.NextHead(s.head, b.Audit)
	if err != nil {
		return err
	}
	if err := checkOutbox(b); err != nil {
		return err
	}
	if err := s.outbox.checkResolved("", b.OutboxResolved); err != nil {
		return err
	}
	for _, h := range b.OutboxHeld {
		if err := s.outbox.checkHeld(h); err != nil {
			return err
		}
	}
	for _, r := range b.Audit {
		s.audit.append(keepRecord(r))
	}
	s.head = head
	s.appendKeys(b.Keys)
	if b.EvictBelow > 0 {
		cut := sort.Search(len(s.keys), func(i int) bool { return s.keys[i].Ordinal >= b.EvictBelow })
		s.keys = s.keys[cut:]
	}
	s.nextKey = max(s.nextKey, b.NextKey)
	for _, src := range b.Sources {
		s.sources[src.ID()] = copySource(src)
	}
	for _, e := range b.Entities {
		s.entities[e.Name] = copyEntity(e)
	}
	for _, q := range b.Quarantine {
		q.Payload = slices.Clone(q.Payload)
		s.quarantine[q.ID] = q
		s.held.add(q)
	}
	for _, id := range b.Resolved {
		s.held.remove(s.quarantine[id])
		delete(s.quarantine, id)
	}
	for _, r := range b.OutboxResolved {
		s.outbox.resolve(r)
	}
	s.outbox.add(b.Outbox)
	for _, h := range b.OutboxHeld {
		s.outbox.hold("", h)
	}
	return nil
}

// appendKeys adds entries to the window, keeping it in ordinal order and
// unique by ordinal (a later entry replaces an earlier one) even if a
// caller breaks the append-only contract.
func (s *Store) appendKeys(keys []engine.KeyEntry) {
	inOrder := true
	last := uint64(0)
	if n := len(s.keys); n > 0 {
		last = s.keys[n-1].Ordinal
	}
	for i, k := range keys {
		if (i > 0 || len(s.keys) > 0) && k.Ordinal <= last {
			inOrder = false
		}
		last = k.Ordinal
	}
	s.keys = append(s.keys, keys...)
	if !inOrder {
		slices.SortStableFunc(s.keys, func(a, b engine.KeyEntry) int { return cmp.Compare(a.Ordinal, b.Ordinal) })
		s.keys = lastByOrdinal(s.keys)
	}
}

// lastByOrdinal keeps the last of each run of entries sharing an ordinal.
func lastByOrdinal(keys []engine.KeyEntry) []engine.KeyEntry {
	out := keys[:0]
	for i, k := range keys {
		if i+1 < len(keys) && keys[i+1].Ordinal == k.Ordinal {
			continue
		}
		out = append(out, k)
	}
	return out
}

// ScanAudit calls fn with a copy of each record from position from on. It
// holds no lock while fn runs, so fn may use the store.
func (s *Store) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return engine.ErrClosed
	}
	view, base := s.audit.view(), s.base
	s.mu.RUnlock()
	return view.scan(max(from, base.Position+1, 1), func(r *engine.AuditRecord) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(copyRecord(*r))
	})
}

// AuditBase returns the last dropped record's position and hash; zero when
// none was dropped.
func (s *Store) AuditBase(ctx context.Context) (engine.AuditHead, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return engine.AuditHead{}, engine.ErrClosed
	}
	return s.base, nil
}

// TrimAudit drops the records below below and makes base the store's
// audit base; see engine.AuditTrimmer.
func (s *Store) TrimAudit(ctx context.Context, below uint64, base engine.AuditHead) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return engine.ErrClosed
	}
	if below != base.Position+1 || base.Position <= s.base.Position || base.Position > s.head.Position {
		return fmt.Errorf("%w: base at position %d for a trim below %d, with the stored log at %d..%d",
			engine.ErrTrimBase, base.Position, below, s.base.Position+1, s.head.Position)
	}
	for id := range s.quarantine {
		if id < below {
			return fmt.Errorf("%w: entry %d", engine.ErrTrimQuarantine, id)
		}
	}
	if r := s.audit.at(base.Position); r == nil || r.Hash != base.Hash {
		return fmt.Errorf("%w: at position %d", engine.ErrTrimBase, base.Position)
	}
	s.audit.drop(below)
	s.base = base
	return nil
}

// CountQuarantine counts the open entries.
func (s *Store) CountQuarantine(context.Context) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, engine.ErrClosed
	}
	return len(s.quarantine), nil
}

// ScanQuarantine calls fn with a copy of each open entry in ID order, as
// they were when the scan began.
func (s *Store) ScanQuarantine(ctx context.Context, fn func(engine.QuarantineEntry) error) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return engine.ErrClosed
	}
	entries := slices.Collect(maps.Values(s.quarantine))
	s.mu.RUnlock()
	slices.SortFunc(entries, func(a, b engine.QuarantineEntry) int { return cmp.Compare(a.ID, b.ID) })
	for _, q := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		q.Payload = slices.Clone(q.Payload)
		if err := fn(q); err != nil {
			return err
		}
	}
	return nil
}

// Quarantined returns a copy of the open entry id, or engine.ErrNotFound.
func (s *Store) Quarantined(ctx context.Context, id uint64) (engine.QuarantineEntry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return engine.QuarantineEntry{}, engine.ErrClosed
	}
	q, ok := s.quarantine[id]
	if !ok {
		return engine.QuarantineEntry{}, fmt.Errorf("%w: quarantine entry %d", engine.ErrNotFound, id)
	}
	q.Payload = slices.Clone(q.Payload)
	return q, nil
}

// Close drops the data; every later call returns engine.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return engine.ErrClosed
	}
	s.closed = true
	s.keys, s.sources, s.entities, s.audit, s.quarantine, s.outbox = nil, nil, nil, auditLog{}, nil, nil
	return nil
}
