package memory

import (
	"context"
	"maps"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.CursorStore = (*Store)(nil)

// Cursor returns the sink's cursor; 0 when it never delivered.
func (s *Store) Cursor(ctx context.Context, name string) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, engine.ErrClosed
	}
	return s.cursors[name], nil
}

// SetCursor records the sink's cursor.
func (s *Store) SetCursor(ctx context.Context, name string, pos uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return engine.ErrClosed
	}
	if s.cursors == nil {
		s.cursors = map[string]uint64{}
	}
	s.cursors[name] = pos
	return nil
}

// Cursors returns every stored cursor, by sink name.
func (s *Store) Cursors(ctx context.Context) (map[string]uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, engine.ErrClosed
	}
	return maps.Clone(s.cursors), nil
}

// ForgetCursor drops the sink's cursor; false when there was none.
func (s *Store) ForgetCursor(ctx context.Context, name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, engine.ErrClosed
	}
	_, ok := s.cursors[name]
	delete(s.cursors, name)
	return ok, nil
}
