package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"
)

// ownedWindows are the windows of a single-owner store: the engine's
// memory, loaded once from Store.Load. The store is this process's alone,
// so nothing changes them behind the engine's back: each batch is decided
// on them, sealed, and queued to the committer goroutine, which writes the
// batches in order while the next ones are decided.
type ownedWindows struct {
	noLosses
	e *Engine

	queue        chan *commitJob // sealed batches, to the committer
	stopped      chan struct{}   // closed when the committer returns
	committedGen atomic.Uint64   // the generation the committer accepts
	// landedRows is the pending.gen of the last batch committed: a row
	// whose last change is at or below it has no write in flight (trim).
	landedRows atomic.Uint64
	// untold is set when a commit fails with a submitted batch in it or
	// behind it, and cleared when a submitted batch's wait returns a
	// commit's error: until then the caller has not seen the failure, and
	// a batch it submits now would commit ahead of the failed one. An
	// operator action's failed commit sets it only when a submitted batch
	// fails with it or behind it; act, which returns the action's failure
	// itself, never clears it.
	untold atomic.Bool
	// submits counts the submitted batches sealed and not yet landed.
	submits atomic.Int64
	gen     uint64      // state generation: bumped by every reload after a failed commit; under e.mu
	evicted uint64      // EvictBelow last sealed; under e.mu
	last    *commitJob  // the batch sealed last; under e.mu
	fresh   []freshRows // the rows created by batches sealed, oldest first (dropFresh); under e.mu
}

// newOwnedWindows starts the committer; close stops it.
func newOwnedWindows(e *Engine) *ownedWindows {
	w := &ownedWindows{e: e, queue: make(chan *commitJob, 4), stopped: make(chan struct{})}
	go w.committer()
	return w
}

// load (re)builds the in-memory state from the store.
func (w *ownedWindows) load(ctx context.Context) error {
	e := w.e
	var snap *Snapshot
	var err error
	if e.rows != nil {
		snap, err = e.rows.r.LoadKeys(ctx)
		if err == nil {
			e.rows.sources, e.rows.entities, err = e.rows.r.CountRows(ctx)
		}
	} else {
		snap, err = e.store.Load(ctx)
	}
	if err != nil {
		return fmt.Errorf("load store: %w", err)
	}
	e.keys = newKeyWindow(e.opts.MaxEntries, snap.NextKey)
	e.keys.reserve(len(snap.Keys))
	for _, k := range snap.Keys {
		e.keys.add(k.Key, k.Digest, e.ages.stored(k.Time), k.Ordinal)
	}
	w.evicted = 0
	e.sources = make(map[string]*SourceState, len(snap.Sources))
	for i := range snap.Sources {
		s := snap.Sources[i]
		e.sources[s.ID()] = &s
	}
	e.entities = make(map[string]*entity, len(snap.Entities))
	for _, st := range snap.Entities {
		e.entities[st.Name] = entityFromState(st)
	}
	e.headMu.Lock()
	e.head = snap.AuditHead
	e.headMu.Unlock()
	e.tail = snap.AuditHead
	e.resetPending()
	e.clearHeld()
	w.fresh = nil
	w.gen = w.committedGen.Load()
	return nil
}

func (w *ownedWindows) submit(ctx context.Context, msgs []Message) (<-chan struct{}, func() ([]Decision, error), error) {
	e := w.e
	w.trim()
	if err := e.ready(ctx); err != nil { // a commit failed
		return nil, nil, err
	}
	if w.untold.Load() {
		return nil, nil, fmt.Errorf("%w: a batch submitted before this one failed to commit, and its wait has not returned the error yet", ErrAborted)
	}
	now := e.opts.Now()
	e.keys.expire(e.readKeyClock(now) - int64(e.ttl))
	out := make([]Decision, len(msgs))
	if b := &e.pending.batch; b.Audit == nil { // room for the batch: no copying as it grows
		b.Audit, b.Keys = make([]AuditRecord, 0, len(msgs)), make([]KeyEntry, 0, len(msgs))
	}
	if e.rows != nil {
		e.rows.begin(ctx)
		defer e.rows.release()
	}
	w.beginHeld(ctx)
	for i := range msgs {
		out[i] = e.decideOne(&msgs[i], now, 0, "")
	}
	if err := w.settleRows(); err != nil {
		return nil, nil, err
	}
	c := w.seal(ctx, true)
	return c.done, func() ([]Decision, error) {
		<-c.done
		if c.err != nil {
			w.untold.Store(false)
			return nil, c.err
		}
		return out, nil
	}, nil
}

// act lets e.mu go while the commit runs. Once sealed, the action commits
// whether or not its caller still waits: the batches sealed behind it are
// decided on top of it, and a commit failed by a caller's cancellation
// would abort them and reload the whole state.
func (w *ownedWindows) act(ctx context.Context, msgs []Message, fill func(now time.Time)) error {
	return w.commitAction(ctx, fill, true)
}

// actAlone keeps e.mu while the commit runs: no batch is decided on top of
// the action's before the store took or refused it, so a refusal fails the
// action alone, never a consumer's batch sealed behind it.
func (w *ownedWindows) actAlone(ctx context.Context, fill func(now time.Time)) error {
	return w.commitAction(ctx, fill, false)
}

// commitAction seals fill's action and waits for its commit, letting e.mu
// go meanwhile when unlock is set.
func (w *ownedWindows) commitAction(ctx context.Context, fill func(now time.Time), unlock bool) error {
	if w.e.rows != nil {
		w.e.rows.begin(ctx)
		defer w.e.rows.release()
	}
	w.beginHeld(ctx)
	now := w.e.opts.Now()
	w.e.readKeyClock(now)
	fill(now)
	if err := w.settleRows(); err != nil {
		return err
	}
	c := w.seal(context.WithoutCancel(ctx), false)
	if !unlock {
		<-c.done // the committer never takes e.mu
		return c.err
	}
	w.e.mu.Unlock()
	<-c.done
	w.e.mu.Lock()
	return c.err
}

// beginHeld starts the held-entry lookups of a batch or action. Once
// every batch sealed before it is committed, the store's index holds
// their entries: the engine forgets those it noted (noteHeldEntry), so
// that what it keeps does not grow with the quarantine. Called with e.mu
// held.
func (w *ownedWindows) beginHeld(ctx context.Context) {
	l := w.e.heldFind
	if l == nil {
		return
	}
	if w.last == nil || landed(w.last.done) {
		clear(l.added)
	}
	l.begin(ctx)
}

// landed reports whether done is closed.
func landed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// commitJob is one sealed batch on its way to the store.
type commitJob struct {
	ctx   context.Context
	batch *Batch
	gen   uint64 // the state generation it was decided in
	rows  uint64 // the pending.gen its rows' changes are marked with
	head  AuditHead
	// submitted: by submit, whose caller takes the outcome from wait
	// (not an operator action's).
	submitted bool
	done      chan struct{}
	err       error
}

// seal turns the pending changes into a batch, with the key window's
// evictions, and queues it for the committer. Called with e.mu held.
func (w *ownedWindows) seal(ctx context.Context, submitted bool) *commitJob {
	e := w.e
	rows, fresh := e.pending.gen, e.pending.fresh
	b := e.takeBatch()
	w.noteFresh(rows, fresh)
	b.NextKey = e.keys.next
	if old := e.keys.oldest(); old > w.evicted {
		b.EvictBelow = old
		w.evicted = old
	}
	c := &commitJob{ctx: ctx, batch: b, gen: w.gen, rows: rows, head: e.tail, submitted: submitted, done: make(chan struct{})}
	if submitted {
		w.submits.Add(1)
		if c.gen != w.committedGen.Load() { // decided on a failed commit: it will be aborted
			w.untold.Store(true)
		}
	}
	e.outboxInFlight.Add(int64(len(b.Outbox)))
	w.queue <- c
	w.last = c
	return c
}

// drain waits until every batch sealed so far is committed or failed. The
// committer never takes e.mu, so it may be called with e.mu held.
func (w *ownedWindows) drain() {
	if w.last != nil {
		<-w.last.done
	}
}

// committer writes sealed batches in order. It is the only caller of
// store.Commit, and stops when the queue is closed. The batches that wait
// in the queue behind the one it takes go with it in one commit (see
// groupable): when commits are what holds the feed back, a fleet's
// batches rewrite many of the same pages, and sync once.
func (w *ownedWindows) committer() {
	defer close(w.stopped)
	var next *commitJob
	for open := true; open || next != nil; {
		c := next
		if c == nil {
			if c, open = <-w.queue; !open {
				return
			}
		}
		group := []*commitJob{c}
		next = nil
	gather:
		for open && groupable(c, c) {
			select {
			case n, ok := <-w.queue:
				if !ok {
					open = false
					break gather
				}
				if !groupable(c, n) {
					next = n
					break gather
				}
				group = append(group, n)
			default:
				break gather
			}
		}
		err := w.commitGroup(group)
		for i, j := range group {
			// Only now: a committed batch's entries were counted into
			// the outbox by its observer (commitOne), so none goes
			// uncounted in between.
			w.e.outboxInFlight.Add(-int64(len(j.batch.Outbox)))
			j.err = err
			if err != nil && i > 0 {
				j.err = fmt.Errorf("%w: written with a batch before it, whose commit failed: %v", ErrAborted, err)
			}
			if j.submitted {
				w.submits.Add(-1)
			}
			close(j.done)
		}
	}
}

// groupable reports whether batch n may be written in one commit with
// first, the first of a group: decided in the same state generation for
// the same caller, and neither resolving held entries (whose order
// against the batch's other writes a store keeps).
func groupable(first, n *commitJob) bool {
	b := n.batch
	return n.gen == first.gen && n.ctx == first.ctx &&
		len(b.Resolved) == 0 && len(b.OutboxHeld) == 0 && len(b.OutboxResolved) == 0 && len(b.SQL) == 0
}

// mergeBatches is the one batch that writes what bs write in order: the
// later write of a row wins.
func mergeBatches(bs []*commitJob) *Batch {
	var ns, ne, nk, na int
	for _, j := range bs {
		ns, ne, nk, na = ns+len(j.batch.Sources), ne+len(j.batch.Entities), nk+len(j.batch.Keys), na+len(j.batch.Audit)
	}
	m := &Batch{NewRows: &RowCount{}, Sources: make([]SourceState, 0, ns), Entities: make([]EntityState, 0, ne),
		Keys: make([]KeyEntry, 0, nk), Audit: make([]AuditRecord, 0, na)}
	sources, entities := make(map[string]int, ns), make(map[string]int, ne)
	for _, j := range bs {
		b := j.batch
		if b.NewRows == nil || m.NewRows == nil {
			m.NewRows = nil
		} else {
			m.NewRows.Sources += b.NewRows.Sources
			m.NewRows.Entities += b.NewRows.Entities
		}
		m.Keys = append(m.Keys, b.Keys...)
		m.EvictBelow = max(m.EvictBelow, b.EvictBelow)
		m.NextKey = max(m.NextKey, b.NextKey)
		for _, s := range b.Sources {
			id := s.ID()
			if i, ok := sources[id]; ok {
				m.Sources[i] = s
				continue
			}
			sources[id] = len(m.Sources)
			m.Sources = append(m.Sources, s)
		}
		for _, st := range b.Entities {
			if i, ok := entities[st.Name]; ok {
				m.Entities[i] = st
				continue
			}
			entities[st.Name] = len(m.Entities)
			m.Entities = append(m.Entities, st)
		}
		m.Audit = append(m.Audit, b.Audit...)
		m.Quarantine = append(m.Quarantine, b.Quarantine...)
		m.Outbox = append(m.Outbox, b.Outbox...)
	}
	return m
}

// commitGroup writes the group's batches in one commit.
func (w *ownedWindows) commitGroup(group []*commitJob) error {
	c := group[len(group)-1]
	if len(group) == 1 {
		return w.commitOne(c, c.batch, group)
	}
	return w.commitOne(c, mergeBatches(group), group)
}

// commitOne commits b, the batches of group, whose last is c.
func (w *ownedWindows) commitOne(c *commitJob, b *Batch, group []*commitJob) error {
	e := w.e
	if c.gen != w.committedGen.Load() {
		return fmt.Errorf("%w: a batch before it failed to commit", ErrAborted)
	}
	done := e.commitStarted()
	err := e.store.Commit(c.ctx, b)
	done()
	if err != nil {
		// Batches decided on top of this one fail from now on; the next
		// caller to take the engine's lock reloads the committed state.
		// Taking the lock here could deadlock with a caller that holds it
		// while waiting for room in the queue.
		// The generation first: a batch sealed from now on that was decided
		// on the failed state marks the failure untold itself (seal).
		w.committedGen.Add(1)
		if w.submits.Load() > 0 { // a submitted batch fails with it, or behind it
			w.untold.Store(true) // before the reload is asked for: a batch decided on the reloaded state sees it
		}
		e.log.Error("commit failed; the committed state will be reloaded", "err", err, "records", len(b.Audit), "batches", len(group))
		e.reload.Store(true)
		return fmt.Errorf("commit: %w", err)
	}
	w.landedRows.Store(c.rows)
	e.headMu.Lock()
	e.head = c.head
	e.headMu.Unlock()
	for _, j := range group {
		e.observe(j.batch)
	}
	return nil
}

func (w *ownedWindows) close() {
	close(w.queue)
	<-w.stopped
}

func (w *ownedWindows) member() (string, bool) { return "", false }

func (w *ownedWindows) readState(ctx context.Context, limit int) ([]EntityState, int, error) {
	e := w.e
	if e.rows != nil { // memory holds some rows only: read the store's, in name order
		out, err := firstEntities(ctx, e.rows.r, limit)
		if err != nil {
			return nil, 0, err
		}
		e.mu.Lock()
		total := e.rows.entities
		e.mu.Unlock()
		return out, total, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]EntityState, 0, len(e.entities))
	var slab Fields
	for name, ent := range e.entities {
		var st EntityState
		st, slab = ent.state(name, slab)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return firstOf(out, limit), len(out), nil
}

// firstEntities reads the first limit entities of r in name order; every
// one when limit <= 0.
func firstEntities(ctx context.Context, r RowScanner, limit int) ([]EntityState, error) {
	var out []EntityState
	err := r.ScanEntities(ctx, func(st EntityState) error {
		if limit > 0 && len(out) == limit {
			return errEnough
		}
		out = append(out, st)
		return nil
	})
	if err != nil && err != errEnough {
		return nil, err
	}
	return out, nil
}

// errEnough stops a scan that has read what it needs.
var errEnough = errors.New("enough rows read")

// firstOf is the first limit of states; every one when limit <= 0.
func firstOf(states []EntityState, limit int) []EntityState {
	if limit > 0 && len(states) > limit {
		return states[:limit]
	}
	return states
}

func (w *ownedWindows) readSources(ctx context.Context, limit int) (SourceSelection, error) {
	e := w.e
	p := sourcePick{n: limit}
	if e.rows != nil {
		err := e.rows.r.ScanSources(ctx, func(s SourceState) error {
			p.add(&s)
			return nil
		})
		if err != nil {
			return SourceSelection{}, err
		}
		return p.done(), nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.sources {
		p.add(s)
	}
	return p.done(), nil
}

// countGaps reads the store's windows one at a time when memory holds
// some rows only, else those in memory.
func (w *ownedWindows) countGaps(ctx context.Context) (int, int64, error) {
	e := w.e
	if e.rows != nil {
		n, gaps := 0, int64(0)
		err := e.rows.r.ScanSources(ctx, func(s SourceState) error {
			n, gaps = n+1, gaps+s.openGaps()
			return nil
		})
		return n, gaps, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	gaps := int64(0)
	for _, s := range e.sources {
		gaps += s.openGaps()
	}
	return len(e.sources), gaps, nil
}

func (w *ownedWindows) stats() Stats {
	e := w.e
	e.mu.Lock()
	defer e.mu.Unlock()
	e.headMu.Lock()
	defer e.headMu.Unlock()
	st := Stats{Keys: e.keys.len(), MaxKeys: e.opts.MaxEntries, OldestKey: e.keys.oldestTime(),
		Sources: len(e.sources), Entities: len(e.entities), Position: e.head.Position, Head: e.head.Hash}
	if e.rows != nil {
		st.Sources, st.Entities = e.rows.sources, e.rows.entities
	}
	return st
}
