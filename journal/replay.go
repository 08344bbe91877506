package journal

import (
	"fmt"
	"os"
	"slices"

	"github.com/replayguard/replayguard/engine"
)

// Replay: see engine.Journal.
func (j *Journal) Replay(after engine.AuditHead, fn func(engine.JournalEntry) error) (engine.Span, error) {
	j.mu.Lock()
	start, uncovered := j.replayStart(after)
	todo := slices.Clone(j.index[start:])
	segs := slices.Clone(j.segs)
	j.mu.Unlock()
	if fn == nil {
		return uncovered, nil
	}
	var f *os.File
	var fseq uint64
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for _, e := range todo {
		if e.Kind != engine.JournalBatch {
			continue
		}
		if f == nil || fseq != e.sseq {
			if f != nil {
				f.Close()
			}
			var err error
			if f, err = openSegment(segs, e.sseq); err != nil {
				return uncovered, err
			}
			fseq = e.sseq
		}
		full, err := readAt(f, e)
		if err != nil {
			return uncovered, err
		}
		if err := fn(full); err != nil {
			return uncovered, err
		}
	}
	return uncovered, nil
}

// replayStart finds where Replay begins and what it cannot cover. Called
// with j.mu held.
func (j *Journal) replayStart(after engine.AuditHead) (int, engine.Span) {
	for i := len(j.index) - 1; i >= 0; i-- {
		if e := &j.index[i]; e.Kind == engine.JournalBatch && e.Head == after {
			return i + 1, engine.Span{From: 1, To: 0}
		}
	}
	for i := len(j.index) - 1; i >= 0; i-- {
		if e := &j.index[i]; e.Kind == engine.JournalBatch && e.Head.Position <= after.Position {
			return i + 1, engine.Span{From: 1, To: 0}
		}
	}
	// Nothing at or below after: the journal begins above it. What lies
	// between is not here.
	top := j.last.Head.Position
	for _, e := range j.index {
		if e.Kind == engine.JournalBatch {
			top = e.First - 1
			break
		}
	}
	return 0, engine.Span{From: after.Position + 1, To: top}
}

func openSegment(segs []segment, seq uint64) (*os.File, error) {
	for _, s := range segs {
		if s.seq == seq {
			f, err := os.Open(s.path)
			if err != nil {
				return nil, fmt.Errorf("journal: %w", err)
			}
			return f, nil
		}
	}
	return nil, fmt.Errorf("journal: segment %016x is gone", seq)
}

// readAt reads e's whole record, its messages included.
func readAt(f *os.File, e entry) (engine.JournalEntry, error) {
	b := make([]byte, e.size)
	if _, err := f.ReadAt(b, e.off); err != nil {
		return engine.JournalEntry{}, fmt.Errorf("journal: read %s at %d: %w", f.Name(), e.off, err)
	}
	full, err := decodeBody(b[frameHeader:], true)
	if err != nil {
		return engine.JournalEntry{}, fmt.Errorf("%w: %s at offset %d", ErrCorrupt, f.Name(), e.off)
	}
	return full, nil
}
