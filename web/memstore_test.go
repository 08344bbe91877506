package web

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/replayguard/replayguard/engine"
)

// memStore is a small in-memory engine.Store with audit and quarantine
// scanning, for these tests only.
type memStore struct {
	mu       sync.Mutex
	keys     []engine.KeyEntry
	nextKey  uint64
	sources  map[string]engine.SourceState
	entities map[string]engine.EntityState
	audit    []engine.AuditRecord
	head     engine.AuditHead
	quar     map[uint64]engine.QuarantineEntry
}

func newMemStore() *memStore {
	return &memStore{sources: map[string]engine.SourceState{}, entities: map[string]engine.EntityState{},
		quar: map[uint64]engine.QuarantineEntry{}}
}

// clone deep-copies v through JSON: the engine keeps mutating what it hands over.
func clone[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func (s *memStore) Load(context.Context) (*engine.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := &engine.Snapshot{Keys: clone(s.keys), AuditHead: s.head, NextKey: s.nextKey}
	for _, st := range s.sources {
		snap.Sources = append(snap.Sources, clone(st))
	}
	for _, e := range s.entities {
		snap.Entities = append(snap.Entities, clone(e))
	}
	return snap, nil
}

func (s *memStore) Commit(_ context.Context, b *engine.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(b.Audit) > 0 && b.Audit[0].Position != s.head.Position+1 {
		return fmt.Errorf("%w: %d after %d", engine.ErrAuditGap, b.Audit[0].Position, s.head.Position)
	}
	s.keys = append(s.keys, b.Keys...)
	kept := s.keys[:0]
	for _, k := range s.keys {
		if k.Ordinal >= b.EvictBelow {
			kept = append(kept, k)
		}
	}
	s.keys, s.nextKey = kept, b.NextKey
	for _, st := range b.Sources {
		s.sources[st.ID()] = clone(st)
	}
	for _, e := range b.Entities {
		s.entities[e.Name] = clone(e)
	}
	for _, r := range b.Audit {
		s.audit = append(s.audit, r)
		var h engine.Hash
		if _, err := hex.Decode(h[:], []byte(r.Hash)); err != nil {
			return fmt.Errorf("audit record %d: hash: %w", r.Position, err)
		}
		s.head = engine.AuditHead{Position: r.Position, Hash: h}
	}
	for _, q := range b.Quarantine {
		s.quar[q.ID] = q
	}
	for _, id := range b.Resolved {
		delete(s.quar, id)
	}
	return nil
}

func (s *memStore) Close() error { return nil }

func (s *memStore) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	s.mu.Lock()
	recs := append([]engine.AuditRecord(nil), s.audit...)
	s.mu.Unlock()
	for _, r := range recs {
		if r.Position < from {
			continue
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (s *memStore) ScanQuarantine(ctx context.Context, fn func(engine.QuarantineEntry) error) error {
	s.mu.Lock()
	ids := make([]uint64, 0, len(s.quar))
	for id := range s.quar {
		ids = append(ids, id)
	}
	entries := make([]engine.QuarantineEntry, 0, len(ids))
	slices.Sort(ids)
	for _, id := range ids {
		entries = append(entries, s.quar[id])
	}
	s.mu.Unlock()
	for _, e := range entries {
		if err := fn(e); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (s *memStore) Quarantined(_ context.Context, id uint64) (engine.QuarantineEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.quar[id]
	if !ok {
		return e, fmt.Errorf("%w: quarantine entry %d", engine.ErrNotFound, id)
	}
	return e, nil
}
