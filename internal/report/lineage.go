package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
)

// LineageOptions say whose lineage to read and up to when.
type LineageOptions struct {
	// Entities are the entities to explain; one at least.
	Entities []string
	// Field keeps only that field's changes; empty: every field.
	Field string
	// At shows the entities as the picture showed them at that moment:
	// decisions after it are left out. Zero: up to the last record read.
	At time.Time
	// Keep holds only the last Keep changes of each lineage while the
	// records are read, as Trim would leave them, in memory that does not
	// grow with a busy entity's history; 0: every change.
	Keep int
	// Bases are where audit retention left each chain beginning in the
	// store, by member ("" on a single-owner store): a chain read up to
	// less than its base (every record of it archived, and no archive
	// read) is an error, as a chain that begins past position 1 is; a
	// member absent from the map has base 0 (its chain never trimmed).
	// Positions above a chain's base that are not read are the store's
	// loss: a break (audit.ErrBroken). Nil: the bases were not read (no
	// chain is known to be trimmed), and missing positions are named
	// without saying which of the archive and the store should hold them.
	Bases map[string]engine.AuditHead
	// Heads are the chain heads the store keeps, by member ("" on a
	// single-owner store), read before the records: each chain must be
	// read up to its head at least, and its record there must be the one
	// the head names, or the lineage would be read from a log whose tail
	// was removed. Nil: no head is checked.
	Heads map[string]engine.AuditHead
}

// Lineage is one entity's history as the audit log holds it: every decision
// that changed it, in the order the log holds them (by time across a
// group's chains), and beside each the other deliveries of the same key.
type Lineage struct {
	Entity string     `json:"entity"`
	Field  string     `json:"field,omitempty"`
	At     *time.Time `json:"at,omitempty"`
	// State is the entity as the picture showed it at At (or after the last
	// record read): each field's value after the last change to it.
	State   map[string]json.RawMessage `json:"state"`
	Changes []Change                   `json:"changes"`
	// Omitted counts the earlier changes left out of Changes (Trim): the
	// report's sections hold the last ones; explain holds every one.
	Omitted int `json:"omitted,omitempty"`
	// Suppressed counts the deliveries of the changes' keys that were
	// suppressed as duplicates: the replays the entity did not take. Twins
	// counts apart those another redundant path (mqtt.feeds) delivered than
	// the change's, duplicates by design.
	Suppressed int `json:"suppressed"`
	Twins      int `json:"twins,omitempty"`
	// Read is what the lineage was read from: how many records, and how
	// many applied ones carry no effects before the first that does, in
	// their chain (written before records said what they changed, or of
	// routes that change no entity; a lineage that counts any may miss
	// changes).
	Read LineageRead `json:"read"`
}

// LineageRead says what a lineage was read from.
type LineageRead struct {
	Records        uint64 `json:"records"`
	WithoutEffects uint64 `json:"applied_without_effects"`
}

// Change is one decision that changed the entity.
type Change struct {
	Decision
	Route    string          `json:"route"`
	Topic    string          `json:"topic"`
	Source   []string        `json:"source,omitempty"`
	Epoch    string          `json:"epoch,omitempty"`
	Sequence *int64          `json:"sequence,omitempty"`
	ID       string          `json:"id,omitempty"`
	Key      string          `json:"key"`
	Effects  []engine.Change `json:"effects"`
	// Suppressed are the deliveries of the same key and content decided
	// duplicate: the replays of the change.
	Suppressed []Decision `json:"suppressed"`
	// Held are the deliveries of the same key that were held (a conflict,
	// a quarantined or malformed message, or other content of the key
	// delivered again while an entry held it: a duplicate of that entry,
	// no replay of the change) and the operator decisions on them (a
	// discard, a release decided duplicate or held again); the
	// release that applied one is the change itself, its Ref naming the
	// held entry.
	Held []Decision `json:"held"`
}

// Decision is one audit record as a lineage shows it.
type Decision struct {
	Position uint64    `json:"position"`
	Member   string    `json:"member,omitempty"`
	Time     time.Time `json:"time"`
	Outcome  string    `json:"outcome"`
	Reason   string    `json:"reason,omitempty"`
	Broker   string    `json:"broker,omitempty"`
	Feed     string    `json:"feed,omitempty"` // the redundant path that delivered it (mqtt.feeds)
	Dup      bool      `json:"dup"`
	Ref      uint64    `json:"ref,omitempty"`
	Operator string    `json:"operator,omitempty"`
}

func decisionOf(r *engine.AuditRecord) Decision {
	return Decision{Position: r.Position, Member: r.Member, Time: r.Time, Outcome: r.Outcome, Reason: r.Reason,
		Broker: r.Broker, Feed: r.Feed, Dup: r.Dup, Ref: r.Ref, Operator: r.Operator}
}

// ErrNoEntity is a lineage asked of no entity.
var ErrNoEntity = errors.New("report: no entity named")

// ErrChainTrimmed is a lineage read from a chain whose first positions are
// not in the store (audit retention archived them) and no archive gave.
var ErrChainTrimmed = errors.New("a lineage without them would be a part of one")

// ErrChainBroken is a lineage read from a chain whose records do not link
// (an archive of another store read before the store, or a broken chain).
var ErrChainBroken = errors.New("its prev hash is not that record's hash")

// Lineages reads records twice (it must be a scan that can run again, as
// Records and Chains are): once for the decisions that changed the
// entities, once for the other deliveries of their keys. They come back in
// the order opts names the entities.
func Lineages(records iter.Seq2[engine.AuditRecord, error], opts LineageOptions) ([]*Lineage, error) {
	if len(opts.Entities) == 0 {
		return nil, ErrNoEntity
	}
	out := make([]*Lineage, len(opts.Entities))
	byName := make(map[string]*Lineage, len(out))
	for i, name := range opts.Entities {
		if l := byName[name]; l != nil { // named twice: one lineage
			out[i] = l
			continue
		}
		l := &Lineage{Entity: name, Field: opts.Field, State: map[string]json.RawMessage{}, Changes: []Change{}}
		if !opts.At.IsZero() {
			at := opts.At.UTC()
			l.At = &at
		}
		out[i], byName[name] = l, l
	}
	// ref is a change of a key: its lineage, its ordinal among the
	// lineage's changes (Omitted and its index in Changes), and the
	// ordinal of its record in the scan.
	type ref struct {
		l      *Lineage
		i      int
		at     uint64
		feed   string // the change's
		digest uint64 // the change's content digest (digestOf)
	}
	byKey := map[engine.Hash][]ref{}
	var read LineageRead
	chains := chainsRead{hashed: true, heads: opts.Heads, bases: opts.Bases}
	withEffects := map[string]bool{} // chains that have had a record with effects
	for r, err := range records {
		if err != nil {
			return nil, err
		}
		ord, err := chains.next(&r)
		if err != nil {
			return nil, err
		}
		if chains.pastAt(&r, opts.At) {
			continue // a group's chains interleave by time: read on
		}
		read.Records++
		if len(r.Effects) > 0 {
			withEffects[r.Member] = true
		} else if o, ok := engine.ParseOutcome(r.Outcome); ok && o.Effective() && !withEffects[r.Member] {
			read.WithoutEffects++
		}
		for name, effects := range entityEffects(&r, byName, opts.Field) {
			l := byName[name]
			c := Change{Decision: decisionOf(&r), Route: r.Route, Topic: r.Topic, Source: r.Source, Epoch: r.Epoch,
				Sequence: cloneSeq(r.Sequence), ID: r.ID, Effects: effects, Suppressed: []Decision{}, Held: []Decision{}}
			if !r.Key.IsZero() {
				c.Key = r.Key.String()
				byKey[r.Key] = append(byKey[r.Key], ref{l, l.Omitted + len(l.Changes), ord, r.Feed, digestOf(&r)})
			}
			l.Changes = append(l.Changes, c)
			if opts.Keep > 0 && len(l.Changes) >= 2*opts.Keep {
				l.drop(len(l.Changes) - opts.Keep)
			}
			for _, e := range effects {
				l.State[e.Field] = e.After
			}
		}
	}
	if err := chains.reached(opts.Bases); err != nil {
		return nil, err
	}
	if err := chains.atHeads(); err != nil {
		return nil, err
	}
	if len(byKey) > 0 {
		chains = chainsRead{}
		for r, err := range records {
			if err != nil {
				return nil, err
			}
			ord, err := chains.next(&r)
			if err != nil {
				return nil, err
			}
			refs := byKey[r.Key]
			if chains.pastAt(&r, opts.At) || r.Key.IsZero() || len(refs) == 0 || len(r.Effects) > 0 {
				continue
			}
			o, known := engine.ParseOutcome(r.Outcome)
			// A key applied more than once (its window entry expired, or a
			// held copy was released) has a change each time: a delivery
			// belongs, in each lineage, to the last change before it.
			var owners []ref
			for _, x := range refs {
				switch j := slices.IndexFunc(owners, func(y ref) bool { return y.l == x.l }); {
				case j < 0:
					owners = append(owners, x)
				case x.at < ord:
					owners[j] = x
				}
			}
			for _, x := range owners {
				var c *Change // nil: a change left out, only counted
				if i := x.i - x.l.Omitted; i >= 0 {
					c = &x.l.Changes[i]
				}
				switch {
				case known && o == engine.Duplicate && r.Ref == 0 && x.digest == digestOf(&r): // a release decided duplicate is an operator's decision, held below
					if c != nil {
						c.Suppressed = append(c.Suppressed, decisionOf(&r))
					}
					if isTwin(x.feed, r.Feed) {
						x.l.Twins++
					} else {
						x.l.Suppressed++
					}
				case (!known || !o.Effective()) && c != nil: // held, or an operator's discard, or other content of the key held again (a duplicate of its entry)
					c.Held = append(c.Held, decisionOf(&r))
				}
			}
		}
	}
	for _, l := range byName {
		l.Read = read
		if opts.Keep > 0 {
			l.Trim(opts.Keep)
		}
	}
	return out, nil
}

// Trim keeps the last n changes of l, counting those it leaves out in
// Omitted; its state and counts stay those of the whole lineage.
func (l *Lineage) Trim(n int) {
	if len(l.Changes) > n {
		l.drop(len(l.Changes) - n)
	}
}

// drop leaves out the first n changes, in place: what they held is let go.
func (l *Lineage) drop(n int) {
	kept := copy(l.Changes, l.Changes[n:])
	clear(l.Changes[kept:])
	l.Changes = l.Changes[:kept]
	l.Omitted += n
}

// chainsRead follows the chains of a scan: each must begin at position 1,
// skip none and link each record to the one before it (an archive that is
// another store's does not), or the lineage would be a part of one, or
// another's. With hashed, each record's content must match its hash, or
// the lineage would show what was altered; with heads, each chain must
// reach its head (atHeads).
type chainsRead struct {
	last   map[string]engine.AuditHead // each chain's last record read
	n      uint64                      // records read
	past   map[string]bool             // the chains read past LineageOptions.At
	hashed bool
	heads  map[string]engine.AuditHead
	bases  map[string]engine.AuditHead // nil: not read
}

// pastAt reports whether r, the record next read, comes after at (zero:
// none does): it does when its time is after at, or when an earlier record
// of its chain's was. A chain's records are in the order they were
// decided, their times not always (the wall clock stepped back): the
// picture at a moment is a prefix of each chain, the state it shows the
// state after the changes it lists.
func (c *chainsRead) pastAt(r *engine.AuditRecord, at time.Time) bool {
	if at.IsZero() {
		return false
	}
	if c.past[r.Member] {
		return true
	}
	if !r.Time.After(at) {
		return false
	}
	if c.past == nil {
		c.past = map[string]bool{}
	}
	c.past[r.Member] = true
	return true
}

// next checks r and returns its ordinal in the scan.
func (c *chainsRead) next(r *engine.AuditRecord) (uint64, error) {
	if c.last == nil {
		c.last = map[string]engine.AuditHead{}
	}
	prev, ok := c.last[r.Member]
	if from, base := prev.Position+1, c.bases[r.Member].Position; c.bases != nil && r.Position > from && r.Position-1 > base {
		// Reaching above the store's base: the store never moved those to
		// the archive, and does not hold them. Those below it, if any, the
		// archive read before (a record of the chain was read) lacks.
		what := audit.Missing(from, r.Position-1, base, true, "", ok)
		if ok {
			return 0, fmt.Errorf("%s: positions %d..%d were not read: %w", chainName(r.Member), from, r.Position-1,
				&audit.BrokenError{Position: from, Member: r.Member, Reason: what})
		}
		return 0, fmt.Errorf("%s begins at position %d in the store: %w", chainName(r.Member), r.Position,
			&audit.BrokenError{Position: from, Member: r.Member, Reason: what})
	}
	switch {
	case !ok && r.Position != 1:
		return 0, fmt.Errorf("%s begins at position %d in the store: positions 1..%d are not in it (audit retention archived them), and %w; "+
			"give their archive (--archive DIR, or audit.archive in the configuration)", chainName(r.Member), r.Position, r.Position-1, ErrChainTrimmed)
	case ok && r.Position != prev.Position+1 && c.bases == nil:
		return 0, fmt.Errorf("%s: positions %d..%d were not read: neither the archive nor the store holds them (audit verify --archive names where), "+
			"or audit retention moved them to the archive while they were read (read again)", chainName(r.Member), prev.Position+1, r.Position-1)
	case ok && r.Position != prev.Position+1:
		return 0, fmt.Errorf("%s: positions %d..%d were not read: %w", chainName(r.Member), prev.Position+1, r.Position-1,
			&audit.BrokenError{Position: prev.Position + 1, Member: r.Member, Reason: "the archive lacks them (audit verify --archive names the missing segment), " +
				"or audit retention moved them to the archive while they were read (read again)"})
	case ok && r.Prev != prev.Hash:
		return 0, fmt.Errorf("%s breaks at position %d: it does not link to the record at position %d (%w): an archive of another store, or a broken chain; audit verify --archive names it",
			chainName(r.Member), r.Position, prev.Position, ErrChainBroken)
	case !ok && r.Position == 1 && !r.Prev.IsZero():
		return 0, unsound(r.Member, 1, "prev does not match the previous record's hash")
	}
	if c.hashed {
		if h, err := engine.ChainHash(*r); err != nil || h != r.Hash {
			return 0, unsound(r.Member, r.Position, "hash does not match the record's content (altered)")
		}
	}
	if h, ok := c.heads[r.Member]; ok && r.Position == h.Position && r.Hash != h.Hash {
		return 0, unsound(r.Member, r.Position, fmt.Sprintf("the last record's hash does not match the chain head at position %d", h.Position))
	}
	c.last[r.Member] = engine.AuditHead{Position: r.Position, Hash: r.Hash}
	c.n++
	return c.n, nil
}

// reached checks that each chain of bases was read up to its base at
// least: a chain retention moved wholly into the archive has no record in
// the store to begin past position 1.
func (c *chainsRead) reached(bases map[string]engine.AuditHead) error {
	for _, m := range slices.Sorted(maps.Keys(bases)) {
		if b, last := bases[m], c.last[m].Position; last < b.Position {
			return fmt.Errorf("%s has no record in the store past position %d: positions %d..%d are not in it (audit retention archived them), and %w; "+
				"give their archive (--archive DIR, or audit.archive in the configuration)", chainName(m), b.Position, last+1, b.Position, ErrChainTrimmed)
		}
	}
	return nil
}

// atHeads checks that each chain was read up to the head the store keeps
// for it at least: a log whose tail was removed would give a shorter
// lineage.
func (c *chainsRead) atHeads() error {
	for _, m := range slices.Sorted(maps.Keys(c.heads)) {
		if h, last := c.heads[m], c.last[m].Position; last < h.Position {
			return unsound(m, last+1, fmt.Sprintf("log ends at position %d but the chain head is at %d", last, h.Position))
		}
	}
	return nil
}

// unsound is the error of a lineage read from member's chain, broken at
// position for reason: the words audit verify says it with.
func unsound(member string, position uint64, reason string) error {
	return fmt.Errorf("%w; a lineage read from it would show a log that is not the one written", &audit.BrokenError{Position: position, Member: member, Reason: reason})
}

// entityEffects returns r's effects on each of the entities, those on
// field alone when it is set.
func entityEffects(r *engine.AuditRecord, entities map[string]*Lineage, field string) iter.Seq2[string, []engine.Change] {
	return func(yield func(string, []engine.Change) bool) {
		if len(r.Effects) == 0 {
			return
		}
		var seen []string
		for i, e := range r.Effects {
			if entities[e.Entity] == nil || slices.Contains(seen, e.Entity) {
				continue
			}
			seen = append(seen, e.Entity)
			var mine []engine.Change
			for _, f := range r.Effects[i:] {
				if f.Entity == e.Entity && (field == "" || f.Field == field) {
					mine = append(mine, f)
				}
			}
			if len(mine) > 0 && !yield(e.Entity, mine) {
				return
			}
		}
	}
}

// Where names a decision in a message: its position, and its member on a
// shared store.
func (d Decision) Where() string {
	if d.Member == "" {
		return fmt.Sprintf("#%d", d.Position)
	}
	return fmt.Sprintf("%s#%d", d.Member, d.Position)
}
