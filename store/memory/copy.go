package memory

import (
	"maps"
	"slices"

	"github.com/replayguard/replayguard/engine"
)

// The copy functions give the store and its callers separate memory: a
// caller may reuse a batch, or change what it read, without touching the
// store.

func copyRecord(r engine.AuditRecord) engine.AuditRecord {
	r.Source = slices.Clone(r.Source)
	if r.Sequence != nil {
		seq := *r.Sequence
		r.Sequence = &seq
	}
	if r.Gap != nil {
		gap := *r.Gap
		r.Gap = &gap
	}
	return r
}

func copySource(s engine.SourceState) engine.SourceState {
	s.Source = slices.Clone(s.Source)
	s.Seen = slices.Clone(s.Seen)
	s.Epochs = slices.Clone(s.Epochs)
	for i := range s.Epochs {
		s.Epochs[i].Bitmap = slices.Clone(s.Epochs[i].Bitmap)
		s.Epochs[i].Gaps = slices.Clone(s.Epochs[i].Gaps)
	}
	return s
}

func copyEntity(e engine.EntityState) engine.EntityState {
	e.Fields = maps.Clone(e.Fields)
	return e
}
