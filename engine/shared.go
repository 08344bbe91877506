package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
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
	// as it is, with nothing written (ErrReadAgain is not a failure). A
	// store whose server cannot hold the locks of r's rows at once fails
	// with ErrLockTable, nothing written.
	Update(ctx context.Context, r *Reads, decide func(*Rows) (*Batch, error)) error
}

// Reads names the rows one batch touches.
type Reads struct {
	Keys      []Hash   // idempotency keys, ascending, unique
	Sources   []string // SourceState.ID() of each (route, source), ascending, unique
	Entities  []string // entity names, ascending, unique
	KeyCutoff int64    // unix nanoseconds: a key applied before it has expired
	// SkipHeld lets the store leave out a source or entity row that
	// another member's Update holds, instead of waiting for it, and name
	// it in Rows.Held: the engine then decides only the deliveries that
	// touch none of them, and the rest in a batch of their own. A store
	// that cannot tell a held row waits for it, as without SkipHeld.
	SkipHeld bool
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
	// Held names the rows left out because another Update held them
	// (Reads.SkipHeld): neither read nor locked, so the batch must not
	// touch them.
	Held HeldRows
}

// HeldRows are the source and entity rows an Update with Reads.SkipHeld
// left out because another Update held them.
type HeldRows struct {
	Sources  []string // SourceState.ID()
	Entities []string
}

// Empty reports whether no row was left out.
func (h HeldRows) Empty() bool { return len(h.Sources)+len(h.Entities) == 0 }

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

// ChainKeeper is what audit retention and the audit sinks need of a shared
// store, chain by chain: each member trims, archives and streams its own
// audit chain, and a live member takes over the chain of one that is gone
// (its lease expired), as it takes over its outbox.
//
// The methods on one member's chain behave as AuditTrimmer and
// CursorStore do on a single-owner store's log. Safe for concurrent use.
type ChainKeeper interface {
	ChainBaser
	// TrimChain drops every record of member's chain with position <
	// below, atomically, and makes base its new base: base must be the
	// stored record at below-1 (ErrTrimBase otherwise), and an open
	// quarantine entry of that member whose record is below below refuses
	// the trim with ErrTrimQuarantine. A chain whose claim (ClaimChains)
	// another handle holds, unexpired, is refused with ErrChainClaimed: a
	// handle trims a chain no one claims, or one it claims itself.
	// ScanChain then begins after the base. Nothing changes on error. A
	// read-only handle fails.
	TrimChain(ctx context.Context, member string, below uint64, base AuditHead) error
	// ChainCursor returns the cursor of sink on member's chain: the
	// position of the last record the sink delivered; 0 when none.
	ChainCursor(ctx context.Context, member, sink string) (uint64, error)
	// SetChainCursor records pos as that cursor, durably when it returns
	// nil, unless the cursor is already past it (a handle whose claim of
	// the chain ended cannot take it back). A member the group never had
	// fails it with ErrNotFound, a read-only handle fails.
	SetChainCursor(ctx context.Context, member, sink string, pos uint64) error
	// SetChainCursorAt is SetChainCursor for a sink that delivered the
	// record at: it records at.Position only if member's chain holds that
	// very record (its hash) there, atomically, and fails with
	// ErrCursorRecord otherwise. A batch read before a failover to a
	// standby that lacked its records thus cannot leave a cursor past
	// records the chain then holds at those positions and the sink never
	// delivered.
	SetChainCursorAt(ctx context.Context, member, sink string, at AuditHead) error
	// ChainCursors returns every cursor stored on member's chain, by sink
	// name: those of sinks no live process configures too. Audit
	// retention trims the chain no further than the lowest.
	ChainCursors(ctx context.Context, member string) (map[string]uint64, error)
	// ForgetSink drops sink's cursor on every member's chain and returns
	// the members whose chain had one, sorted: an operator's word that
	// the sink is gone for good, so that its cursors no longer hold
	// retention back. A read-only handle fails.
	ForgetSink(ctx context.Context, sink string) ([]string, error)
	// QuarantineBases returns every member's quarantine base (see
	// SharedStore.QuarantineBase), by member id: an open entry's id minus
	// its member's base is its record's position in that member's chain.
	QuarantineBases(ctx context.Context) (map[string]uint64, error)
	// ClaimChains takes or renews this handle's chain claims and returns,
	// sorted, the members whose chains it may trim and stream now: the
	// claim of its own member, unless another live handle holds it; and
	// that of every other member with a chain whose member lease is
	// expired or free, when that claim is free, expired or already this
	// handle's. The rules are OutboxClaimer's (a claim lasts ClaimTTL
	// unless renewed; a member that holds its lease again gets its claim
	// back once this handle stops renewing it, within ClaimTTL; a handle
	// whose member's lease another process took claims nothing; Close
	// releases the handle's claims), with chains in place of outboxes.
	// A read-only handle fails.
	ClaimChains(ctx context.Context) ([]string, error)
	// ReleaseChain gives up this handle's claim on member's chain; a claim
	// it does not hold is left alone.
	ReleaseChain(ctx context.Context, member string) error
}

// ChainBaser says where audit retention left each member's chain of a
// shared store beginning.
type ChainBaser interface {
	// ChainBase returns the last dropped record of member's chain (its
	// position and hash); zero when nothing was dropped or the member has
	// no chain.
	ChainBase(ctx context.Context, member string) (AuditHead, error)
}

// ErrMemberHeld is returned when a shared store is opened under a member
// id whose lease another live process holds.
var ErrMemberHeld = errors.New("replayguard: member id held by another live process")

// ErrContention is returned by Update when other members kept winning the
// races for its rows through every retry.
var ErrContention = errors.New("replayguard: batch lost every retry to other members")

// ErrLockTable is returned by Update, with nothing written, when the
// store's server could not hold the locks of every row the batch names at
// once (PostgreSQL: "out of shared memory", its lock table full); the
// error names the setting that bounds them. The engine then decides the
// batch in two parts, each split again while it fails so, down to one
// delivery, which fails as any store error does when even its rows do not
// fit.
var ErrLockTable = errors.New("replayguard: the store's server cannot hold the locks of the batch's rows")

// sharedWindows are the windows of a consumer group's store: the engine
// keeps none between batches. For each batch (or operator action) the
// store reads the rows it touches under its concurrency control, the
// engine makes them its whole window state and decides on them, and the
// store writes the batch atomically with the reads; the batch is then
// journaled. The store's head of this member's chain is compared with the
// journal's at start and whenever it may have failed over (storeloss.go).
type sharedWindows struct {
	e       *Engine
	store   SharedStore
	scan    RowScanner // nil: the rows are read by Load
	journal Journal    // nil: none
	// redeciding is the Head of the lost batch a recovery decides again
	// (JournalEntry.Redecides).
	redeciding AuditHead
	// unjournaled is the entry of a committed batch the journal refused:
	// appended before anything else is decided (appendUnjournaled), while
	// the batch's deliveries, passed again, keep the decisions committed.
	unjournaled *JournalEntry
	// lost are the positions of this member's chain each store loss an
	// operator accepted gave up, in order: a delivery whose decision a
	// part of its batch committed at one of them, before that acceptance,
	// has no decision any more (keptDecisions).
	lost []Span
	// halved counts the parts of the batch being decided that were split
	// in two because the store's server could not hold their rows' locks
	// (decideHalves); the error that said so is lockTable.
	halved    int
	lockTable error
	// started: the member's first load is done, and with it the notes of
	// what its journal's last batch held (noteLastJournaled).
	started bool
}

// errNotJournaled is a committed batch's journal append that failed: its
// deliveries are not acknowledged, and are marked committed, so that the
// caller's next attempt appends the entry and hands their decisions over,
// instead of deciding them again (duplicates audited and counted a second
// time, malformed ones held twice).
type errNotJournaled struct{ err error }

func (e errNotJournaled) Error() string { return "journal: " + e.err.Error() }
func (e errNotJournaled) Unwrap() error { return e.err }

// appendUnjournaled appends the entry the journal refused last, if any.
// It comes before every other entry, and before the journal is read to
// compare the store's head with the member's or to recover a loss: the
// batch is committed, and its deliveries are handed their decisions when
// they are passed again, so a store that lost it must be found to have,
// and be given it again from the journal, like any commit acknowledged.
func (w *sharedWindows) appendUnjournaled() error {
	if w.unjournaled == nil {
		return nil
	}
	if err := w.journal.Append(*w.unjournaled); err != nil {
		w.e.log.Error("journal append failed again: a committed batch is not acknowledged", "err", err)
		return errNotJournaled{err}
	}
	w.unjournaled = nil
	return nil
}

// newSharedWindows makes e a member of sh's group: its records name the
// member, its quarantine ids are the member's, its versions are ordered
// across the group.
func newSharedWindows(e *Engine, sh SharedStore, scan RowScanner, journal Journal) *sharedWindows {
	e.member, e.qbase, e.groupOrder = sh.Member(), sh.QuarantineBase(), true
	return &sharedWindows{e: e, store: sh, scan: scan, journal: journal}
}

// load reads this member's chain head from the store and compares it with
// the one the member committed: a store that lost commits is recovered,
// or stops the engine (the error is the *StoreLoss). The windows are the
// store's: the engine's stay empty between batches.
func (w *sharedWindows) load(ctx context.Context) error {
	e := w.e
	if err := w.appendUnjournaled(); err != nil { // the member's last commit, compared with the rest
		return err
	}
	if e.group != nil && !e.group.anchor() {
		return fmt.Errorf("load store: %w", ErrNoServerClock)
	}
	known := w.known() // before the head read here replaces the one in memory
	head, err := w.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("load store: %w", err)
	}
	e.keys = newKeyWindow(e.opts.MaxEntries, 0)
	e.sources = map[string]*SourceState{}
	e.entities = map[string]*entity{}
	if err := w.checkHead(ctx, head, known); err != nil {
		return err
	}
	if w.started { // a reload after a failed commit: the source acknowledges what was journaled before it
		return nil
	}
	if err := w.noteLastJournaled(ctx); err != nil {
		return err
	}
	w.started = true
	return nil
}

// submit commits before it returns: the batch has landed, and wait only
// hands over the outcome.
func (w *sharedWindows) submit(ctx context.Context, msgs []Message) (<-chan struct{}, func() ([]Decision, error), error) {
	out, err := w.decideBatch(ctx, msgs)
	return landedAlready, func() ([]Decision, error) { return out, err }, nil
}

// landedAlready is the landed channel of a batch committed (or failed)
// before its submit returned.
var landedAlready = func() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (w *sharedWindows) act(ctx context.Context, msgs []Message, fill func(now time.Time)) error {
	if err := w.appendUnjournaled(); err != nil {
		return err
	}
	now := w.e.opts.Now()
	return w.update(ctx, w.e.reads(msgs, now), func() { fill(now) }, nil, nil)
}

// actAlone is act: a member's commit runs with e.mu held, before any
// other batch is decided.
func (w *sharedWindows) actAlone(ctx context.Context, fill func(now time.Time)) error {
	return w.act(ctx, nil, fill)
}

func (w *sharedWindows) member() (string, bool) { return w.e.member, true }

// close has nothing to stop: every batch was committed before its submit
// returned.
func (w *sharedWindows) close() {}

// skipRounds is how many parts of one batch leave out the rows other
// members hold (Reads.SkipHeld); the part after them waits for the rows.
const skipRounds = 4

// decideBatch decides and commits one batch. Called with e.mu held.
//
// A batch that touches a row another member's batch holds does not wait
// for it with every row it holds itself (Reads.SkipHeld): it commits the
// deliveries that touch none of the held rows first, then the others in a
// batch of their own (decideParts). Deliveries that share a source window,
// an entity or a key keep their order (splitHeld); the audit chain records
// each part's after the one before. A batch whose rows the store's server
// cannot lock at once (ErrLockTable) is decided in halves (decideHalves).
func (w *sharedWindows) decideBatch(ctx context.Context, msgs []Message) ([]Decision, error) {
	if err := w.appendUnjournaled(); err != nil {
		return nil, err
	}
	w.keptDecisions(msgs)
	if partlyCommitted(msgs) {
		return w.decideRest(ctx, msgs, uncommitted(msgs))
	}
	w.halved, w.lockTable = 0, nil
	out, err := w.decideParts(ctx, msgs, w.e.opts.Now(), 0)
	if w.halved > 0 {
		w.e.log.Warn("the store's server could not hold the locks of a batch's rows at once: it was decided in smaller parts",
			"messages", len(msgs), "splits", w.halved, "committed", err == nil, "err", w.lockTable)
	}
	return out, err
}

// decideParts decides and commits msgs as part round of a batch decided at
// now. While rounds are left, it leaves out the rows another member holds
// and decides what touches them in the next part, which skips held rows
// again if this part decided something: by then the member that held them
// has mostly committed, and the rows are free without a wait. A part that
// could decide nothing, or the last, waits for the rows instead.
func (w *sharedWindows) decideParts(ctx context.Context, msgs []Message, now time.Time, round int) ([]Decision, error) {
	e := w.e
	out := make([]Decision, len(msgs))
	r := e.reads(msgs, now)
	// Not a batch its kind places (its rows are found while deciding), nor
	// a recovery's: what the store holds of a lost batch decided again must
	// be its first deliveries (decideHalves), never those that touch no
	// held row.
	r.SkipHeld = round < skipRounds && e.unread == nil && len(msgs) > 1 && msgs[0].recovery == 0
	var first, later []int // with rows held: the deliveries decided now, and after
	err := w.updateWith(ctx, r, func(rows *Rows) {
		first, later = splitHeld(msgs, rows.Held)
		if later == nil {
			e.pending.expect(len(msgs))
			for i := range msgs {
				out[i] = e.decideOne(&msgs[i], now, 0, "")
			}
			return
		}
		e.pending.expect(len(first))
		for _, i := range first {
			out[i] = e.decideOne(&msgs[i], now, 0, "")
		}
	}, func() ([]Message, []Decision) {
		if later == nil {
			return msgs, out
		}
		return pick(msgs, first), pick(out, first)
	})
	switch {
	case errors.Is(err, ErrLockTable) && len(msgs) > 1:
		w.halved, w.lockTable = w.halved+1, err
		return w.decideHalves(ctx, msgs, now, round)
	case errors.Is(err, ErrLockTable) && w.halved > 0:
		return nil, fmt.Errorf("a batch decided in parts, down to one delivery: %w", err)
	}
	var unjournaled errNotJournaled
	if errors.As(err, &unjournaled) { // committed: passed again, they keep their decisions
		if later == nil {
			first = nil
			for i := range msgs {
				first = append(first, i)
			}
		}
		for _, i := range first {
			w.markCommitted(&msgs[i], &out[i])
		}
	}
	if err != nil {
		return nil, err
	}
	if later == nil {
		return out, nil
	}
	// This part is committed: passed again after a later part fails, its
	// deliveries keep their decisions (the caller passes the same messages
	// until the batch commits).
	for _, i := range first {
		w.markCommitted(&msgs[i], &out[i])
	}
	next := round + 1
	if len(first) == 0 { // every delivery touched a held row: wait for them
		next = skipRounds
	}
	rest := pick(msgs, later)
	decided, err := w.decideParts(ctx, rest, now, next)
	for j, i := range later { // what a later part committed stays marked
		msgs[i] = rest[j]
	}
	if err != nil {
		return nil, err
	}
	for _, i := range first {
		msgs[i].committed = nil
	}
	for j, i := range later {
		out[i] = decided[j]
	}
	return out, nil
}

// decideHalves decides msgs, which the store's server could not lock at
// once (ErrLockTable, nothing written), as two parts of their batch: the
// first half, then the second, each read and locked on its own and split
// again while it fails so. Each half holds about half the locks of new
// rows, and the second follows the first whole, so deliveries that share
// a source window, an entity or a key keep their order.
//
// A recovery's batch, one entry of the journal, is decided so too: each
// part is journaled as a batch that decides again part of the lost one
// (JournalEntry.Redecides), and a part commits only after every part
// before it, so what the store holds of the lost batch, when a recovery
// is cut short between parts, is always its first deliveries, as many as
// those parts hold: a recovery taken up again decides the rest
// (sharedWindows.settled).
func (w *sharedWindows) decideHalves(ctx context.Context, msgs []Message, now time.Time, round int) ([]Decision, error) {
	half := len(msgs) / 2
	first, err := w.decideParts(ctx, msgs[:half], now, round)
	if err != nil {
		return nil, err
	}
	// Committed: passed again after the second half fails, the first
	// keeps its decisions.
	for i := range first {
		w.markCommitted(&msgs[i], &first[i])
	}
	second, err := w.decideParts(ctx, msgs[half:], now, round)
	if err != nil {
		return nil, err
	}
	for i := range first {
		msgs[i].committed = nil
	}
	return append(first, second...), nil
}

// markCommitted notes in m the decision d a part of its batch committed.
func (w *sharedWindows) markCommitted(m *Message, d *Decision) {
	m.committed, m.committedAt = d, len(w.lost)
}

// keptDecisions forgets, in msgs, each decision an earlier part of their
// batch committed at a position a store loss accepted since then gave
// up: the store no longer holds it, and the delivery, never acknowledged,
// is decided again rather than handed a decision that is gone.
func (w *sharedWindows) keptDecisions(msgs []Message) {
	for i := range msgs {
		m := &msgs[i]
		if m.committed == nil {
			continue
		}
		for _, s := range w.lost[min(m.committedAt, len(w.lost)):] {
			if s.From <= m.committed.Position && m.committed.Position <= s.To {
				m.committed = nil
				break
			}
		}
	}
}

// partlyCommitted reports whether an earlier attempt of the batch msgs
// committed some of them.
func partlyCommitted(msgs []Message) bool {
	for i := range msgs {
		if msgs[i].committed != nil {
			return true
		}
	}
	return false
}

// uncommitted returns the indexes of msgs that no earlier attempt of the
// batch committed.
func uncommitted(msgs []Message) []int {
	todo := make([]int, 0, len(msgs))
	for i := range msgs {
		if msgs[i].committed == nil {
			todo = append(todo, i)
		}
	}
	return todo
}

// decideRest decides the deliveries of msgs at todo, the others having
// been committed by an earlier attempt whose second part failed, and
// returns every delivery's decision.
func (w *sharedWindows) decideRest(ctx context.Context, msgs []Message, todo []int) ([]Decision, error) {
	rest := pick(msgs, todo)
	var decided []Decision
	var err error
	if len(rest) > 0 {
		decided, err = w.decideBatch(ctx, rest)
	}
	for j, i := range todo { // what the attempt committed stays marked
		msgs[i] = rest[j]
	}
	if err != nil {
		return nil, err
	}
	out := make([]Decision, len(msgs))
	for i := range msgs {
		if msgs[i].committed != nil {
			out[i], msgs[i].committed = *msgs[i].committed, nil
		}
	}
	for j, i := range todo {
		out[i] = decided[j]
	}
	return out, nil
}

// splitHeld returns, when held names rows, which of msgs to decide now
// and which to leave to a batch after this one: each delivery that touches
// a held row (its source window, an entity its effects name), and each
// after it that touches a row or key one left behind touches. It returns
// nil, nil when nothing is held: every delivery is decided now.
func splitHeld(msgs []Message, held HeldRows) (now, later []int) {
	if held.Empty() {
		return nil, nil
	}
	busy := make(map[string]bool, len(held.Sources)+len(held.Entities))
	for _, id := range held.Sources {
		busy["s"+id] = true
	}
	for _, name := range held.Entities {
		busy["e"+name] = true
	}
	var touched []string
	for i := range msgs {
		d := msgs[i].prepared
		if msgs[i].prepErr != nil || d == nil { // malformed: it touches no row
			now = append(now, i)
			continue
		}
		touched = append(touched[:0], "k"+string(d.key[:]))
		if d.seq >= 0 {
			touched = append(touched, "s"+sourceID(d.route.Name, d.source))
		}
		for _, name := range d.entities {
			if name != "" {
				touched = append(touched, "e"+name)
			}
		}
		if !slices.ContainsFunc(touched, func(t string) bool { return busy[t] }) {
			now = append(now, i)
			continue
		}
		later = append(later, i)
		for _, t := range touched {
			busy[t] = true
		}
	}
	if later == nil { // the held rows were named by no delivery
		return nil, nil
	}
	return now, later
}

// pick returns the elements of s at the indexes idx, in their order.
func pick[T any](s []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = s[i]
	}
	return out
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

// update has the shared store read r's rows, fills the pending batch by
// deciding on them (fill) and has the store write it, then journals the
// batch with the deliveries it decided (msgs, and decided, which fill
// fills with their decisions; both nil for an operator's action). Called
// with e.mu held.
func (w *sharedWindows) update(ctx context.Context, r *Reads, fill func(), msgs []Message, decided []Decision) error {
	return w.updateWith(ctx, r, func(*Rows) { fill() }, func() ([]Message, []Decision) { return msgs, decided })
}

// updateWith is update with a fill that sees the rows read (their Held),
// and the deliveries to journal, with their decisions, asked of
// journaled once the batch is committed.
func (w *sharedWindows) updateWith(ctx context.Context, r *Reads, fill func(*Rows), journaled func() ([]Message, []Decision)) error {
	e := w.e
	defer func() { e.unread = nil }()
	start := e.tail
	var b *Batch
	var err error
	defer e.commitStarted()()
	if e.heldFind != nil {
		e.heldFind.begin(ctx)
		defer e.heldFind.end()
	}
	for round := 0; ; round++ {
		err = w.store.Update(ctx, r, func(rows *Rows) (*Batch, error) {
			e.tail = start // a retry decides the batch again from the same chain head
			e.resetPending()
			e.unackedTaken = nil
			e.clearHeld() // the entries of an earlier decide were never written
			e.loadRows(rows, r.KeyCutoff)
			if e.unread != nil {
				e.unread.start()
			}
			fill(rows)
			if e.heldFind != nil && e.heldFind.err != nil {
				return nil, e.heldFind.err
			}
			if e.unread != nil && e.unread.missed() {
				return nil, ErrReadAgain
			}
			b = e.takeBatch()
			return b, nil
		})
		if !errors.Is(err, ErrReadAgain) {
			break
		}
		e.tail = start
		e.resetPending()
		if round+1 == maxReadRounds {
			err = fmt.Errorf("%w: the batch's rows kept changing through %d reads", ErrContention, maxReadRounds)
			break
		}
		e.unread.widen(r)
	}
	e.refused = nil
	if err != nil {
		// Whether a failed write reached the store may be unknown: the
		// chain head is read again before the next batch.
		e.tail = start
		e.resetPending()
		e.reload.Store(true)
		e.unackedTaken = nil
		return err
	}
	e.headMu.Lock()
	e.head = e.tail
	e.headMu.Unlock()
	e.takeUnacked()
	msgs, decided := journaled()
	jerr := w.journalBatch(b, msgs, decided)
	if len(msgs) > 0 && msgs[0].recovery != 0 { // before the observer counts the batch's decisions: see LossStats
		e.lossMu.Lock()
		e.lossStats.Recovered += uint64(len(msgs))
		e.lossMu.Unlock()
	}
	e.observe(b)
	return jerr
}

// journalBatch appends a committed batch to the journal. Its deliveries
// are not acknowledged when it fails (only what the journal holds is):
// the caller passes them again, and they keep their decisions once the
// entry is appended (errNotJournaled).
func (w *sharedWindows) journalBatch(b *Batch, msgs []Message, decided []Decision) error {
	e := w.e
	if w.journal == nil || len(b.Audit) == 0 {
		return nil
	}
	je := JournalEntry{Kind: JournalBatch, Head: e.tail, First: b.Audit[0].Position, Time: e.journalTime(), Messages: msgs}
	if e.group != nil {
		je.KeyTime = time.Unix(0, e.keyStamp).UTC() // the stamp of the batch's keys
	}
	if len(msgs) == 0 {
		je.Action = b.Audit[0].Outcome
		if len(b.Resolved) > 0 && je.Action != OutcomeDiscarded { // a release: its record has the outcome of deciding the message again
			je.Action = OutcomeReleased
		}
	}
	if len(msgs) > 0 && msgs[0].recovery != 0 {
		je.Redecides = w.redeciding
	}
	if len(decided) > 0 {
		je.Effective = make([]bool, len(decided))
		for i := range decided {
			je.Effective[i] = decided[i].Outcome.Effective()
		}
	}
	if err := w.journal.Append(je); err != nil {
		e.log.Error("journal append failed: the batch is committed but not acknowledged", "err", err)
		w.unjournaled = &je
		return errNotJournaled{err}
	}
	return nil
}

// loadRows makes the rows read for one batch the engine's whole window
// state, so that the batch is decided by the same code as on a
// single-owner store. Key ordinals continue from the member's last, and
// are at least the key clock's stamp in nanoseconds: the group's keys are
// ordered by when they were applied.
//
// The key window holds every key read and every key the batch applies,
// however many: window.max_entries bounds the group's key table, which the
// store prunes (the newest kept), not the rows of one batch. A key evicted
// while its batch is decided would be decided again as new against a row
// the store holds: a replay read as stored, or one of the batch's own
// keys, applied a second time or failing the batch on every retry.
func (e *Engine) loadRows(rows *Rows, cutoff int64) {
	t := e.opts.Now().UnixNano()
	if e.group != nil {
		t = e.keyStamp
	}
	next := max(e.keys.next, uint64(max(t, 0)))
	e.keys = newKeyWindow(math.MaxInt, next)
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

// readState reads the group's entities from the store, sorted by name.
func (w *sharedWindows) readState(ctx context.Context, limit int) ([]EntityState, int, error) {
	if w.scan != nil {
		out, err := firstEntities(ctx, w.scan, limit)
		if err != nil {
			return nil, 0, err
		}
		if limit <= 0 || len(out) < limit {
			return out, len(out), nil
		}
		_, total, err := w.scan.CountRows(ctx)
		return out, max(total, len(out)), err
	}
	snap, err := w.store.Load(ctx)
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(snap.Entities, func(a, b EntityState) int { return strings.Compare(a.Name, b.Name) })
	return firstOf(snap.Entities, limit), len(snap.Entities), nil
}

// readSources reads the group's source windows from the store.
func (w *sharedWindows) readSources(ctx context.Context, limit int) (SourceSelection, error) {
	p := sourcePick{n: limit}
	err := w.eachSource(ctx, func(s *SourceState) { p.add(s) })
	if err != nil {
		return SourceSelection{}, err
	}
	return p.done(), nil
}

// countGaps reads the group's source windows from the store.
func (w *sharedWindows) countGaps(ctx context.Context) (int, int64, error) {
	n, gaps := 0, int64(0)
	err := w.eachSource(ctx, func(s *SourceState) { n, gaps = n+1, gaps+s.openGaps() })
	return n, gaps, err
}

// eachSource calls fn for each of the group's source windows: one at a
// time where the store can scan them, else from one Load.
func (w *sharedWindows) eachSource(ctx context.Context, fn func(*SourceState)) error {
	if w.scan != nil {
		return w.scan.ScanSources(ctx, func(s SourceState) error {
			fn(&s)
			return nil
		})
	}
	snap, err := w.store.Load(ctx)
	if err != nil {
		return err
	}
	for i := range snap.Sources {
		fn(&snap.Sources[i])
	}
	return nil
}

// stats has only this member's position: the windows are the store's.
func (w *sharedWindows) stats() Stats {
	e := w.e
	e.headMu.Lock()
	defer e.headMu.Unlock()
	return Stats{Position: e.head.Position, Head: e.head.Hash, Shared: true}
}

// SharedStats are a shared store's counters since it was opened, for the
// metrics (a shared store implements StatsReporter).
type SharedStats struct {
	Updates       uint64  // batches Update wrote
	Retries       uint64  // decide calls repeated after another member won a race
	Failures      uint64  // Update calls that returned an error
	UpdateSeconds float64 // time spent in Update calls that wrote
	Rows          uint64  // audit records written (batch sizes add up to it)
	LockWaits     uint64  // waits for a row lock, where the store shows them
	HeldRows      uint64  // rows an Update left out because another member held them (Reads.SkipHeld)
	Durable       bool    // false when opened with a named durability opt-out
	NotDurable    string  // the setting that makes it so, when !Durable
	// AsyncReplication, when not empty, says how the store's server
	// replicates without making a commit wait for a replica (accepted
	// through store.allow_async_replication): a failover may lose
	// acknowledged commits, which only the member's journal brings back.
	AsyncReplication string
	LastError        string        // the last Update or lease error, "" once one succeeds
	LeaseError       string        // the last lease renewal's error, "" once one succeeds
	LeaseExpires     time.Time     // when this member's lease ends unless renewed
	LeaseRenewed     time.Time     // this process's clock when the lease was last taken or renewed
	LeaseTTL         time.Duration // how long a renewal holds the lease
	// Fenced is set for good by the first error that said another
	// process holds this member's lease (ErrMemberHeld after the store
	// opened): this handle must write nothing as the member again.
	Fenced string
	// ClockOffset is this member's clock less the store server's, as the
	// last lease renewal measured it (within ClockUncertainty, half its
	// round trip), when ClockMeasured is set: the member's audit records
	// carry its wall time, the group's keys the server's (ServerClock).
	ClockOffset, ClockUncertainty time.Duration
	ClockMeasured                 time.Time
}

// StatsReporter is implemented by shared stores.
type StatsReporter interface {
	SharedStats() SharedStats
}
