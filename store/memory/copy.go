package memory

import (
	"slices"
	"strings"

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
	if r.Effects != nil {
		r.Effects = slices.Clone(r.Effects)
		for i := range r.Effects {
			c := &r.Effects[i]
			c.Entity = strings.Clone(c.Entity) // the engine's shares the message's names
			c.Value, c.After = slices.Clone(c.Value), slices.Clone(c.After)
		}
	}
	return r
}

// keepRecord is copyRecord for a record the store keeps: its source parts,
// epoch and id are copied too, into one allocation, since the engine's may
// be substrings of the whole message payload.
func keepRecord(r engine.AuditRecord) engine.AuditRecord {
	r = copyRecord(r)
	n := len(r.Epoch) + len(r.ID)
	for _, p := range r.Source {
		n += len(p)
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range r.Source {
		b.WriteString(p)
	}
	b.WriteString(r.Epoch)
	b.WriteString(r.ID)
	all, at := b.String(), 0
	next := func(s string) string {
		at += len(s)
		return all[at-len(s) : at]
	}
	for i, p := range r.Source {
		r.Source[i] = next(p)
	}
	r.Epoch = next(r.Epoch)
	r.ID = next(r.ID)
	return r
}

func copySource(s engine.SourceState) engine.SourceState {
	s.Source = slices.Clone(s.Source)
	s.Seen = slices.Clone(s.Seen)
	s.Sparkplug = s.Sparkplug.Clone()
	s.Epochs = slices.Clone(s.Epochs)
	for i := range s.Epochs {
		s.Epochs[i].Bitmap = slices.Clone(s.Epochs[i].Bitmap)
		s.Epochs[i].Gaps = slices.Clone(s.Epochs[i].Gaps)
	}
	return s
}

func copyEntity(e engine.EntityState) engine.EntityState {
	e.Fields = slices.Clone(e.Fields)
	return e
}
