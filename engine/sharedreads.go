package engine

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"
)

// maxReadRounds bounds how often one batch is decided again on wider
// Reads before Update fails.
const maxReadRounds = 8

// ErrReadAgain is what the engine's decide function returns to
// SharedStore.Update when deciding looked for rows its Reads did not name:
// the store returns it as it is, with nothing written, and does not count
// it as a failed update; the engine calls Update again on wider Reads.
var ErrReadAgain = errors.New("replayguard: the batch looked for rows it did not read")

// unreadRows are the keys and entities deciding a batch looked for and
// did not find, that its Reads did not name. A kind that places its
// deliveries against their source's committed state (Sparkplug) knows
// their keys, and the entities their metrics name, only once it has read
// the source's row; on a shared store the batch's Reads first name only
// its sources (and the json deliveries' rows). The batch is then decided
// again in a new Update whose Reads name these rows too, until deciding
// looks for nothing unread: every decision is made on rows read in the
// same Update as its source, under the same concurrency control.
type unreadRows struct {
	keys     map[Hash]struct{}   // named in Reads
	entities map[string]struct{} // named in Reads
	missKeys map[Hash]struct{}
	missEnts map[string]struct{}
}

func newUnreadRows(r *Reads) *unreadRows {
	u := &unreadRows{keys: make(map[Hash]struct{}, len(r.Keys)), entities: make(map[string]struct{}, len(r.Entities)),
		missKeys: map[Hash]struct{}{}, missEnts: map[string]struct{}{}}
	for _, k := range r.Keys {
		u.keys[k] = struct{}{}
	}
	for _, n := range r.Entities {
		u.entities[n] = struct{}{}
	}
	return u
}

// key notes a key the key window did not hold.
func (u *unreadRows) key(k Hash) {
	if _, ok := u.keys[k]; !ok {
		u.missKeys[k] = struct{}{}
	}
}

// entity notes an entity the batch's rows did not hold.
func (u *unreadRows) entity(name string) {
	if _, ok := u.entities[name]; !ok {
		u.missEnts[strings.Clone(name)] = struct{}{}
	}
}

// start forgets the rows an earlier decide of the batch missed.
func (u *unreadRows) start() {
	clear(u.missKeys)
	clear(u.missEnts)
}

func (u *unreadRows) missed() bool { return len(u.missKeys)+len(u.missEnts) > 0 }

// widen adds the rows the last decide missed to r, which stays sorted.
func (u *unreadRows) widen(r *Reads) {
	for k := range u.missKeys {
		u.keys[k] = struct{}{}
	}
	for n := range u.missEnts {
		u.entities[n] = struct{}{}
	}
	r.Keys = slices.SortedFunc(maps.Keys(u.keys), func(a, b Hash) int { return bytes.Compare(a[:], b[:]) })
	r.Entities = slices.Sorted(maps.Keys(u.entities))
	u.start()
}

// reads decodes msgs (keeping what it found for decideOne) and names every
// row deciding them can touch: each key, each sequenced (route, source),
// each entity an effect names. A delivery its kind places names its
// source alone: the rest is found by deciding (unreadRows). Where the
// store reads its server's clock, it reads the group's key clock for the
// batch: the stamp of its keys and the key cutoff.
func (e *Engine) reads(msgs []Message, now time.Time) *Reads {
	r := &Reads{KeyCutoff: now.Add(-e.ttl).UnixNano()}
	if e.group != nil {
		e.keyStamp, e.keyCutoff = e.readGroupClock()
		r.KeyCutoff = e.keyCutoff
	}
	keys, sources, entities := map[Hash]struct{}{}, map[string]struct{}{}, map[string]struct{}{}
	placing := false
	for i := range msgs {
		m := &msgs[i]
		if m.prepared == nil && m.prepErr == nil {
			m.prepared, m.prepErr = e.decodeFresh(m)
		}
		d := m.prepared
		if m.prepErr != nil || d == nil {
			continue // malformed: it reads nothing
		}
		if d.placer != nil { // its key and entities follow from its source's row
			placing = true
			sources[sourceID(d.route.Name, d.source)] = struct{}{}
			continue
		}
		keys[d.key] = struct{}{}
		if d.seq >= 0 {
			sources[sourceID(d.route.Name, d.source)] = struct{}{}
		}
		for _, name := range d.entities {
			if name != "" {
				entities[name] = struct{}{}
			}
		}
	}
	for k := range keys {
		r.Keys = append(r.Keys, k)
	}
	slices.SortFunc(r.Keys, func(a, b Hash) int { return bytes.Compare(a[:], b[:]) })
	r.Sources = slices.Sorted(maps.Keys(sources))
	r.Entities = slices.Sorted(maps.Keys(entities))
	if placing {
		e.unread = newUnreadRows(r)
	}
	return r
}
