package memory

import (
	"bytes"
	"context"

	"github.com/replayguard/replayguard/engine"
)

var (
	_ engine.RouteRecorder = (*Store)(nil)
	_ engine.RouteRecorder = (*Member)(nil)
	_ engine.RouteRecords  = (*Store)(nil)
	_ engine.RouteRecords  = (*Member)(nil)
)

// RecordRoutes records the key derivation of each route of want that has
// none, and returns the one held for each route of want.
func (s *Store) RecordRoutes(ctx context.Context, want map[string][]byte) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, engine.ErrClosed
	}
	if s.routes == nil {
		s.routes = map[string][]byte{}
	}
	return recordRoutes(s.routes, want), nil
}

// RecordRoutes records the key derivation of each route of want that the
// group has none for, and returns the one the group holds for each route
// of want.
func (m *Member) RecordRoutes(ctx context.Context, want map[string][]byte) (map[string][]byte, error) {
	if err := m.lockWriter("record routes"); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	if m.g.routes == nil {
		m.g.routes = map[string][]byte{}
	}
	return recordRoutes(m.g.routes, want), nil
}

// recordRoutes adds want's routes missing from held, and returns held's
// value of each of want's.
func recordRoutes(held, want map[string][]byte) map[string][]byte {
	got := make(map[string][]byte, len(want))
	for name, d := range want {
		if _, ok := held[name]; !ok {
			held[name] = bytes.Clone(d)
		}
		got[name] = held[name]
	}
	return got
}

// RecordedRoutes returns the key derivation recorded for each of names
// that has one, recording none.
func (s *Store) RecordedRoutes(ctx context.Context, names []string) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, engine.ErrClosed
	}
	return recordedRoutes(s.routes, names), nil
}

// RecordedRoutes returns the key derivation the group records for each of
// names that has one, recording none.
func (m *Member) RecordedRoutes(ctx context.Context, names []string) (map[string][]byte, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	return recordedRoutes(m.g.routes, names), nil
}

func recordedRoutes(held map[string][]byte, names []string) map[string][]byte {
	got := make(map[string][]byte, len(names))
	for _, name := range names {
		if d, ok := held[name]; ok {
			got[name] = bytes.Clone(d)
		}
	}
	return got
}
