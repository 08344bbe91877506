package report

import (
	"cmp"
	"slices"
	"strings"

	"github.com/replayguard/replayguard/engine"
)

// topReplayed bounds Report.Replayed.
const topReplayed = 10

// replays counts, per entity, the duplicates of the keys whose applied
// records changed it. It keeps each applied key with the entities it
// changed, interned: a key is 32 bytes and an index.
type replays struct {
	keys     map[engine.Hash]int32 // → sets
	sets     [][]string            // the entities one applied record changed
	setIndex map[string]int32      // a set's names joined by NUL → its index
	counts   map[string]uint64     // entity → suppressed in the period
}

// note reads r: an applied record's key and entities, or a duplicate of
// one, counted when in the period.
func (p *replays) note(r *engine.AuditRecord, period bool) {
	if r.Key.IsZero() {
		return
	}
	if len(r.Effects) > 0 {
		var names []string
		for _, c := range r.Effects {
			if !slices.Contains(names, c.Entity) {
				names = append(names, c.Entity)
			}
		}
		id := strings.Join(names, "\x00")
		if p.keys == nil {
			p.keys, p.setIndex, p.counts = map[engine.Hash]int32{}, map[string]int32{}, map[string]uint64{}
		}
		i, ok := p.setIndex[id]
		if !ok {
			i = int32(len(p.sets))
			p.sets = append(p.sets, names)
			p.setIndex[id] = i
		}
		p.keys[r.Key] = i
		return
	}
	if !period || r.Outcome != engine.Duplicate.String() {
		return
	}
	if i, ok := p.keys[r.Key]; ok {
		for _, name := range p.sets[i] {
			p.counts[name]++
		}
	}
}

// top returns the n entities with the most replays suppressed, most first
// (ties by name).
func (p *replays) top(n int) []EntityReplays {
	out := make([]EntityReplays, 0, len(p.counts))
	for name, c := range p.counts {
		out = append(out, EntityReplays{Entity: name, Suppressed: c})
	}
	slices.SortFunc(out, func(x, y EntityReplays) int {
		return cmp.Or(cmp.Compare(y.Suppressed, x.Suppressed), strings.Compare(x.Entity, y.Entity))
	})
	return out[:min(n, len(out))]
}
