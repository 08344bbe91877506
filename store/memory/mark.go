package memory

import (
	"context"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.StreamMarks = (*Store)(nil)

// StreamMark returns the mark kept under name.
func (s *Store) StreamMark(ctx context.Context, name string) (engine.StreamMark, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return engine.StreamMark{}, false, engine.ErrClosed
	}
	m, ok := s.marks[name]
	return m, ok, nil
}

// SetStreamMark keeps m under name.
func (s *Store) SetStreamMark(ctx context.Context, name string, m engine.StreamMark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return engine.ErrClosed
	}
	if s.marks == nil {
		s.marks = map[string]engine.StreamMark{}
	}
	s.marks[name] = m
	return nil
}
