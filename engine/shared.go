package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

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
	// decidedAt is when the last part of a batch was decided (decideParts):
	// a part after it is decided no earlier.
	decidedAt time.Time
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
