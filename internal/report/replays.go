package report

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/replayguard/replayguard/engine"
)

// topReplayed bounds Report.Replayed.
const topReplayed = 10

// replayKeys bounds the applied keys replays remembers: about 60 MB. A
// replay of a message older than that many applications is not counted
// (the key window forgets keys too: such a replay is applied again, and
// its lineage shows it).
const replayKeys = 1 << 20

// replays counts, per entity, the duplicates of the keys whose applied
// records changed it: replays, and apart from them the twins, a copy that
// another redundant path (mqtt.feeds) delivered than the applied one's.
// It keeps the last replayKeys applied keys with the entities they
// changed and their feed, interned: a key is 32 bytes and indexes.
type replays struct {
	keys     map[engine.Hash]keySet
	order    []engine.Hash // keys in the order applied, a ring of limit
	next     int
	limit    int               // replayKeys when 0
	sets     [][]string        // the entities one applied record changed
	setIndex map[string]int32  // a set's names joined by NUL → its index
	feeds    []string          // the feeds that delivered applied records; "" first
	counts   map[string]uint64 // entity → replays suppressed in the period
	twins    map[string]uint64 // entity → twins suppressed in the period
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
			p.keys, p.setIndex, p.feeds = map[engine.Hash]keySet{}, map[string]int32{}, []string{""}
			p.counts, p.twins = map[string]uint64{}, map[string]uint64{}
		}
		i, ok := p.setIndex[id]
		if !ok {
			i = int32(len(p.sets))
			p.sets = append(p.sets, names)
			p.setIndex[id] = i
		}
		feed := slices.Index(p.feeds, r.Feed)
		if feed < 0 {
			feed = len(p.feeds)
			p.feeds = append(p.feeds, r.Feed)
		}
		p.remember(r.Key, keySet{set: i, feed: int32(feed), digest: digestOf(r)})
		return
	}
	if !period || r.Outcome != engine.Duplicate.String() || r.Ref != 0 { // a release decided duplicate is an operator's, no replay
		return
	}
	if k, ok := p.keys[r.Key]; ok && k.digest == digestOf(r) {
		counts := p.counts
		if isTwin(p.feeds[k.feed], r.Feed) {
			counts = p.twins
		}
		for _, name := range p.sets[k.set] {
			counts[name]++
		}
	}
}

// isTwin reports whether a duplicate delivered by feed is a twin of a copy
// applied from applied: both name a redundant path, and not the same.
func isTwin(applied, feed string) bool {
	return applied != "" && feed != "" && feed != applied
}

// keySet is an applied key's entities (an index into sets), the feed that
// delivered it (an index into feeds) and its place in order: a key applied
// again has a newer place, which the reuse of its older one must not
// forget.
type keySet struct {
	set, feed, slot int32
	digest          uint64 // the applied content's, its first 8 bytes
}

// digestOf is the first 8 bytes of a record's content digest: a duplicate
// of another digest than the applied record's (a conflict delivered again,
// a duplicate of the quarantine entry that holds it) is no replay of it.
func digestOf(r *engine.AuditRecord) uint64 { return binary.BigEndian.Uint64(r.Digest[:8]) }

// remember keeps key's entities, forgetting the oldest key beyond the
// limit.
func (p *replays) remember(key engine.Hash, k keySet) {
	limit := p.limit
	if limit == 0 {
		limit = replayKeys
	}
	if len(p.order) < limit {
		p.order = append(p.order, key)
		k.slot = int32(len(p.order) - 1)
		p.keys[key] = k
		return
	}
	if old := p.order[p.next]; p.keys[old].slot == int32(p.next) {
		delete(p.keys, old)
	}
	p.order[p.next] = key
	k.slot = int32(p.next)
	p.keys[key] = k
	p.next = (p.next + 1) % limit
}

// top returns the n entities with the most replays suppressed, most first,
// then the most twins (ties by name).
func (p *replays) top(n int) []EntityReplays {
	out := make([]EntityReplays, 0, len(p.counts))
	for name, c := range p.counts {
		out = append(out, EntityReplays{Entity: name, Suppressed: c, Twins: p.twins[name]})
	}
	for name, c := range p.twins {
		if p.counts[name] == 0 {
			out = append(out, EntityReplays{Entity: name, Twins: c})
		}
	}
	slices.SortFunc(out, func(x, y EntityReplays) int {
		return cmp.Or(cmp.Compare(y.Suppressed, x.Suppressed), cmp.Compare(y.Twins, x.Twins), strings.Compare(x.Entity, y.Entity))
	})
	return out[:min(n, len(out))]
}
