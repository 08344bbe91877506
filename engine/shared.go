package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// SharedStore is a store the members of a consumer group share. The store
// is the authority (DESIGN.md, "Stores and consumer groups"): for each
// batch the engine names the rows it touches, the store reads them under
// its concurrency control, the engine decides on exactly those rows with
// the same code as on a single-owner store, and the store writes the
// resulting batch in the same atomic unit as the reads.
//
// Through a SharedStore the engine keeps no window state between batches.
// Load returns the group's sources and entities and this member's audit
// head; it leaves Keys empty (the group's key table is the store's to
// prune) and NextKey zero. Commit writes a batch without reading (the
// conformance suite uses it); EvictBelow and NextKey mean nothing to a
// shared store.
//
// Each member writes its own audit chain (every record names the member),
// fenced by a lease the store takes when it is opened: a second live
// process under the same member id is refused with ErrMemberHeld.
type SharedStore interface {
	Store
	// Member is the member id whose audit chain this handle writes.
	Member() string
	// Head returns the head of this member's audit chain.
	Head(ctx context.Context) (AuditHead, error)
	// QuarantineBase is added to this member's audit positions to form its
	// quarantine ids, unique in the group.
	QuarantineBase() uint64
	// Update reads the rows r names, calls decide with them and writes the
	// batch decide returns, atomically with the reads: when it returns nil
	// the batch is durable and was decided on rows no other member changed
	// before it committed. When another member won a race in between (a
	// key or row inserted first, a version changed), Update calls decide
	// again on fresh rows, a bounded number of times; only the batch of the
	// last call is written. A key in the batch that is stored with a Time
	// at or after r.KeyCutoff is such a lost race: it is never overwritten.
	// A Resolved quarantine entry that is no longer open fails Update with
	// ErrNotFound and nothing is written; an error from decide is returned
	// as it is, with nothing written.
	Update(ctx context.Context, r *Reads, decide func(*Rows) (*Batch, error)) error
}

// Reads names the rows one batch touches.
type Reads struct {
	Keys      []Hash   // idempotency keys, ascending, unique
	Sources   []string // SourceState.ID() of each (route, source), ascending, unique
	Entities  []string // entity names, ascending, unique
	KeyCutoff int64    // unix nanoseconds: a key applied before it has expired
}

// Rows are the stored rows a batch's Reads name; absent rows are left out.
type Rows struct {
	Keys     []KeyEntry // may include expired entries: the engine skips them
	Sources  []SourceState
	Entities []EntityState
	// Refused are the keys whose sql effects the store refused on an
	// earlier call of this Update's decide: each such message is
	// quarantined with its reason instead of applied.
	Refused SQLRefusals
}

// ChainScanner reads the per-member audit chains of a shared store.
type ChainScanner interface {
	// Chains returns every member's chain head, ordered by member id.
	Chains(ctx context.Context) ([]Chain, error)
	// ScanChain is ScanAudit over one member's chain.
	ScanChain(ctx context.Context, member string, from uint64, fn func(AuditRecord) error) error
}

// Chain is one member's audit chain.
type Chain struct {
	Member string
	Head   AuditHead
}

// ErrMemberHeld is returned when a shared store is opened under a member
// id whose lease another live process holds.
var ErrMemberHeld = errors.New("replayguard: member id held by another live process")

// ErrContention is returned by Update when other members kept winning the
// races for its rows through every retry.
var ErrContention = errors.New("replayguard: batch lost every retry to other members")

// submitShared decides and commits one batch on a shared store. Called
// with e.mu held.
func (e *Engine) submitShared(ctx context.Context, msgs []Message) ([]Decision, error) {
	now := e.opts.Now()
	out := make([]Decision, len(msgs))
	err := e.update(ctx, e.reads(msgs, now), func() {
		for i := range msgs {
			out[i] = e.decideOne(&msgs[i], now, 0, "")
		}
	}, msgs, out)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// reads decodes msgs (keeping what it found for decideOne) and names every
// row deciding them can touch: each key, each sequenced (route, source),
// each entity an effect names.
func (e *Engine) reads(msgs []Message, now time.Time) *Reads {
	r := &Reads{KeyCutoff: now.Add(-e.ttl).UnixNano()}
	keys, sources, entities := map[Hash]struct{}{}, map[string]struct{}{}, map[string]struct{}{}
	for i := range msgs {
		m := &msgs[i]
		if m.prepared == nil && m.prepErr == nil {
			m.prepared, m.prepErr = e.decodeFresh(m)
		}
		d := m.prepared
		if m.prepErr != nil || d == nil {
			continue // malformed: it reads nothing
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
	return r
}

// update has the shared store read r's rows, fills the pending batch by
// deciding on them (fill) and has the store write it, then journals the
// batch with the deliveries it decided (msgs, and decided, which fill
// fills with their decisions; both nil for an operator's action). Called
// with e.mu held.
func (e *Engine) update(ctx context.Context, r *Reads, fill func(), msgs []Message, decided []Decision) error {
	start := e.tail
	var b *Batch
	err := e.shared.Update(ctx, r, func(rows *Rows) (*Batch, error) {
		e.tail = start // a retry decides the batch again from the same chain head
		e.resetPending()
		e.loadRows(rows, r.KeyCutoff)
		fill()
		b = e.takeBatch()
		return b, nil
	})
	e.refused = nil
	if err != nil {
		// Whether a failed write reached the store may be unknown: the
		// chain head is read again before the next batch.
		e.tail = start
		e.resetPending()
		e.reload.Store(true)
		return err
	}
	e.headMu.Lock()
	e.head = e.tail
	e.headMu.Unlock()
	jerr := e.journalBatch(b, msgs, decided)
	if len(msgs) > 0 && msgs[0].recovery != 0 { // before the observer counts the batch's decisions: see LossStats
		e.lossMu.Lock()
		e.lossStats.Recovered += uint64(len(msgs))
		e.lossMu.Unlock()
	}
	e.observe(b)
	return jerr
}

// journalBatch appends a committed batch to the journal. Its deliveries
// are not acknowledged when it fails (the caller passes them again and
// finds them duplicates): only what the journal holds is acknowledged.
func (e *Engine) journalBatch(b *Batch, msgs []Message, decided []Decision) error {
	if e.journal == nil || len(b.Audit) == 0 {
		return nil
	}
	je := JournalEntry{Kind: JournalBatch, Head: e.tail, First: b.Audit[0].Position, Time: e.opts.Now(), Messages: msgs}
	if len(msgs) == 0 {
		je.Action = b.Audit[0].Outcome
	}
	if len(decided) > 0 {
		je.Effective = make([]bool, len(decided))
		for i := range decided {
			je.Effective[i] = decided[i].Outcome.Effective()
		}
	}
	if err := e.journal.Append(je); err != nil {
		e.log.Error("journal append failed: the batch is committed but not acknowledged", "err", err)
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// loadRows makes the rows read for one batch the engine's whole window
// state, so that the batch is decided by the same code as on a
// single-owner store. Key ordinals continue from the member's last, and
// are at least the current time in nanoseconds: the group's keys are
// ordered by when they were applied.
func (e *Engine) loadRows(rows *Rows, cutoff int64) {
	next := max(e.keys.next, uint64(max(e.opts.Now().UnixNano(), 0)))
	e.keys = newKeyWindow(e.opts.MaxEntries, next)
	for _, k := range rows.Keys {
		if k.Time >= cutoff {
			e.keys.add(k.Key, k.Digest, k.Time, k.Ordinal)
		}
	}
	clear(e.sources)
	for i := range rows.Sources {
		s := rows.Sources[i].clone()
		e.sources[s.ID()] = &s
	}
	clear(e.entities)
	for _, st := range rows.Entities {
		e.entities[st.Name] = entityFromState(st)
	}
	e.refused = rows.Refused
}

// ReadState returns every entity's state, sorted by name: on a shared
// store the group's, read from the store.
func (e *Engine) ReadState(ctx context.Context) ([]EntityState, error) {
	if e.shared == nil {
		return e.State(), nil
	}
	snap, err := e.shared.Load(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(snap.Entities, func(a, b EntityState) int { return strings.Compare(a.Name, b.Name) })
	return snap.Entities, nil
}

// ReadSources returns every source window: on a shared store the group's,
// read from the store.
func (e *Engine) ReadSources(ctx context.Context) ([]SourceReport, error) {
	if e.shared == nil {
		return e.Sources(), nil
	}
	snap, err := e.shared.Load(ctx)
	if err != nil {
		return nil, err
	}
	return SourceReports(snap.Sources), nil
}

// Member is the shared store's member id whose chain this engine writes;
// empty on a single-owner store.
func (e *Engine) Member() string { return e.member }

// SharedStats are a shared store's counters since it was opened, for the
// metrics (a shared store implements StatsReporter).
type SharedStats struct {
	Updates       uint64  // batches Update wrote
	Retries       uint64  // decide calls repeated after another member won a race
	Failures      uint64  // Update calls that returned an error
	UpdateSeconds float64 // time spent in Update calls that wrote
	Rows          uint64  // audit records written (batch sizes add up to it)
	LockWaits     uint64  // waits for a row lock, where the store shows them
	Durable       bool    // false when opened with a named durability opt-out
	NotDurable    string  // the setting that makes it so, when !Durable
	// AsyncReplication, when not empty, says how the store's server
	// replicates without making a commit wait for a replica (accepted
	// through store.allow_async_replication): a failover may lose
	// acknowledged commits, which only the member's journal brings back.
	AsyncReplication string
	LastError        string        // the last Update or lease error, "" once one succeeds
	LeaseExpires     time.Time     // when this member's lease ends unless renewed
	LeaseTTL         time.Duration // how long a renewal holds the lease
}

// StatsReporter is implemented by shared stores.
type StatsReporter interface {
	SharedStats() SharedStats
}
