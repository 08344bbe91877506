package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for Options fields left zero.
const (
	DefaultTTL          = 2 * time.Hour
	DefaultMaxEntries   = 1_000_000
	DefaultSequenceSpan = 4096
	DefaultKeepEpochs   = 2
	DefaultCachedRows   = 100_000
)

// MaxKeepEpochs bounds Options.KeepEpochs: a source's row holds that many
// older epochs, and is read and written whole with each batch that
// touches the source.
const MaxKeepEpochs = 64

// Options configures an Engine. The zero value of every field but Routes
// means its documented default.
type Options struct {
	Routes       []Route
	TTL          time.Duration // key window age bound; default 2h
	MaxEntries   int           // key window count bound; default 1,000,000
	SequenceSpan int           // anti-replay window, in sequences, a multiple of 64; default 4096
	KeepEpochs   int           // older epoch windows kept per source; default 2
	MaxPayload   int           // bytes; default 256 KiB
	Now          func() time.Time
	Logger       *slog.Logger // nil discards
	Observer     Observer     // nil: none
	// Admit, when set, is called before each batch of Process or Submit is
	// decided, outside the engine's lock, so that operator actions and
	// HoldForward go on meanwhile. An error refuses the batch with nothing
	// decided (the caller passes it again later). It is the outbox's
	// backpressure: it blocks while the outbox is full, until ctx is done.
	// inFlight returns, whenever called, the outbox entries of the batches
	// decided and not yet committed (nor failed): they are in no outbox yet,
	// and count against its bound all the same. nil: every batch is admitted.
	Admit func(ctx context.Context, inFlight func() int) error
	// Kinds are the route kinds besides the built-in json, by their Kind
	// (package sparkplug's RouteKind reads Sparkplug B); a route of a kind
	// not here is refused.
	Kinds []RouteKind
	// Journal keeps, outside a shared store, the chain head and the
	// deliveries of each commit, so that a store that fails over and
	// comes back without them is found out and given them again (see
	// Journal). nil: a loss is still found against the head in memory,
	// but only an operator can accept it. Unused on a single-owner store.
	Journal Journal
	// StoreName names the store in messages about it (its kind and
	// server). Default: its type.
	StoreName string
	// CachedRows bounds the sources and entities kept in memory between
	// batches on a store that reads them one at a time
	// (Capabilities.Rows); past it the rows the last commits wrote are
	// let go and read again when a batch needs them. Default 100,000.
	CachedRows int
	// Elapsed, when set, is the time elapsed since any fixed origin on a
	// clock that never steps: a single-owner engine ages its key window by
	// it, so that a step of the wall clock (Now) evicts no key early.
	// Default: the monotonic readings of Now's times, which time.Now's
	// have (a clock whose times have none is taken as never stepping).
	Elapsed func() time.Duration
}

// Observer hears about every durable commit.
type Observer interface {
	// Committed is called after each commit, in commit order, on the
	// engine's committer goroutine: it must not block (it holds up the next
	// commit). The slices must not be retained.
	Committed(records []AuditRecord, entities []EntityState)
}

// OutboxObserver is an Observer that also hears about the outbox entries
// each commit added: after Committed, on the same goroutine, under the
// same rules (it must not block; the slice must not be retained).
type OutboxObserver interface {
	OutboxCommitted(entries []OutboxEntry)
}

// OutboxResolveObserver is an Observer that also hears about the held
// outbox entries each commit of this engine resolved (RetryForward,
// DropForward): after Committed, on the same goroutine, under the same
// rules. A drainer learns from it that a requeued entry is pending again,
// below where it had read up to.
type OutboxResolveObserver interface {
	OutboxResolved(resolved []OutboxResolve)
}

// OutboxHoldObserver is an Observer that also hears about the pending
// outbox entries each commit of this engine moved to the held ones
// (HoldForward, HoldPending): after Committed, on the same goroutine, under
// the same rules. A drainer waiting to send an entry again learns from it
// at once that an operator set the entry aside, and goes on after it.
type OutboxHoldObserver interface {
	OutboxHolds(held []OutboxHold)
}

// observe tells the observer about a durable commit.
func (e *Engine) observe(b *Batch) {
	o := e.opts.Observer
	if o == nil {
		return
	}
	if len(b.Audit) > 0 {
		o.Committed(b.Audit, b.Entities)
	}
	if e.outObs != nil && len(b.Outbox) > 0 {
		e.outObs.OutboxCommitted(b.Outbox)
	}
	if e.resObs != nil && len(b.OutboxResolved) > 0 {
		e.resObs.OutboxResolved(b.OutboxResolved)
	}
	if e.holdObs != nil && len(b.OutboxHeld) > 0 {
		e.holdObs.OutboxHolds(b.OutboxHeld)
	}
}

// Engine decides messages against durable windows and commits each batch
// of decisions, effects and audit records atomically. Its methods are safe
// for concurrent use; decisions are serialised.
type Engine struct {
	mu         sync.Mutex
	store      Store
	caps       Capabilities
	outObs     OutboxObserver        // opts.Observer, when it is one
	resObs     OutboxResolveObserver // opts.Observer, when it is one
	holdObs    OutboxHoldObserver    // opts.Observer, when it is one
	win        windows               // where the windows come from and batches go: chosen once, in New
	member     string                // the shared store's member id, on every record
	qbase      uint64                // added to audit positions to form quarantine ids
	opts       Options
	log        *slog.Logger
	routes     []*route
	maxPayload int
	ttl        time.Duration

	keys     *keyWindow
	sources  map[string]*SourceState
	entities map[string]*entity
	// rows, on a store that reads rows one at a time, reads the sources
	// and entities missing from sources and entities (lazy.go); nil when
	// they hold every row.
	rows    *lazyRows
	refused SQLRefusals // keys whose sql effects the store refused, for this batch
	// unread, on a shared store while a batch holds deliveries a kind
	// places, collects the rows deciding looked for that the batch's
	// Reads did not name (sharedreads.go).
	unread *unreadRows
	// unacked are the open quarantine entries of commits this member may
	// not have acknowledged when it started (or reloaded), by the content
	// of the delivery each holds (unacked.go); unackedTaken counts those
	// the batch being decided took; unackedNoted are the entries ever
	// noted, taken or not, each noted once.
	unacked      map[Hash][]unackedHeld
	unackedTaken map[Hash]int
	unackedNoted map[uint64]bool
	// heldFind finds the open quarantine entry of a delivery about to be
	// held again (heldagain.go); nil when the store keeps no index of them.
	heldFind *heldLookup
	// resolving are the held outbox entries (Requeue false) whose
	// resolution is being committed.
	resolving map[OutboxResolve]bool
	// acting are the quarantine entries whose release or discard is being
	// committed.
	acting  map[uint64]bool
	tail    AuditHead // chain head including decided, uncommitted records
	pending pending
	closed  bool
	// groupOrder: versions are ordered by key ordinal, which follows time
	// across the group (set by sharedWindows), not by audit position.
	groupOrder bool
	// ages is the clock a single-owner engine's key window ages by; nil on
	// a shared store, whose keys the store keeps.
	ages *keyClock
	// group is the clock a member of a group ages keys by, where its store
	// reads its server's clock (nil: Now); keyStamp its reading for the
	// batch being decided, which stamps the batch's keys.
	group               *groupClock
	keyStamp, keyCutoff int64
	reload              atomic.Bool // a commit failed: reload before deciding
	// committing is when the store's commit under way began, in Unix
	// nanoseconds; 0 when none is (Committing).
	committing atomic.Int64
	// outboxInFlight counts the outbox entries of the batches sealed and
	// not yet committed or failed (Options.Admit).
	outboxInFlight atomic.Int64

	headMu sync.Mutex
	head   AuditHead // committed chain head

	storeName string
	lossMu    sync.Mutex
	loss      *StoreLoss // a loss that stops deciding until recovered or accepted
	lossStats LossStats
}

type pending struct {
	batch    Batch
	sources  []*SourceState  // the sources this batch changed, in the order they first changed
	fresh    freshRows       // the rows this batch created, with lazy rows (dropFresh)
	entities []changedEntity // in the order they first changed
	gen      uint64          // marks the sources and entities this batch changed
	seqs     []int64         // what the batch's audit records' Sequence point to
	changes  []Change        // what the batch's audit records' Effects point into
	raw      []byte          // the JSON values of those changes
}

// expect makes room in the batch for n decisions, each an audit record
// and at most a key, so that deciding a batch of a thousand messages does
// not copy its records again at every doubling of the slice.
func (p *pending) expect(n int) {
	p.batch.Audit = slices.Grow(p.batch.Audit, n)
	p.batch.Keys = slices.Grow(p.batch.Keys, n)
}

// New loads the store's state and returns an engine over it, using what
// the store's Capabilities declare.
func New(ctx context.Context, store Store, opts Options) (*Engine, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	caps := store.Capabilities()
	e := &Engine{store: store, caps: caps, opts: opts, log: opts.Logger, maxPayload: opts.MaxPayload, ttl: opts.TTL}
	e.outObs, _ = opts.Observer.(OutboxObserver)
	e.resObs, _ = opts.Observer.(OutboxResolveObserver)
	e.holdObs, _ = opts.Observer.(OutboxHoldObserver)
	e.storeName = opts.StoreName
	if e.storeName == "" {
		e.storeName = fmt.Sprintf("%T", store)
	}
	kinds, err := kindsOf(opts.Kinds)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, r := range opts.Routes {
		c, err := compileRoute(r, kinds, caps.Shared != nil)
		if err != nil {
			return nil, err
		}
		if c.sqls > 0 && !caps.SQL {
			return nil, fmt.Errorf("%w: route %q: a sql effect runs in the store's own transaction: it needs the postgres store, not %T", ErrConfig, r.Name, store)
		}
		if c.forwards > 0 && caps.Outbox == nil {
			return nil, fmt.Errorf("%w: route %q: store %T keeps no outbox for a forward effect", ErrConfig, r.Name, store)
		}
		if names[r.Name] {
			return nil, fmt.Errorf("%w: route %q defined twice", ErrConfig, r.Name)
		}
		names[r.Name] = true
		e.routes = append(e.routes, c)
	}
	if err := checkDerivations(ctx, caps.Routes, e.routes); err != nil {
		return nil, err
	}
	e.resetPending() // the first batch is number 1: no entity's mark, 0 at first, is one
	if caps.Held != nil {
		e.heldFind = &heldLookup{f: caps.Held}
	}
	if sh := caps.Shared; sh != nil {
		e.win = newSharedWindows(e, sh, caps.Scan, opts.Journal)
		if caps.Clock != nil {
			e.group = &groupClock{src: caps.Clock, since: time.Since, wall: time.Now}
		}
	} else {
		if caps.Rows != nil {
			e.rows = &lazyRows{r: caps.Rows, limit: opts.CachedRows}
		}
		e.ages = &keyClock{elapsed: opts.Elapsed}
		e.win = newOwnedWindows(e)
	}
	if err := e.win.load(ctx); err != nil && !errors.As(err, new(*StoreLoss)) {
		e.win.close()
		return nil, err // a store loss leaves the engine stopped, not unopened: readiness says why
	}
	return e, nil
}

func (o *Options) setDefaults() error {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.SequenceSpan == 0 {
		o.SequenceSpan = DefaultSequenceSpan
	}
	if o.KeepEpochs == 0 {
		o.KeepEpochs = DefaultKeepEpochs
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.CachedRows == 0 {
		o.CachedRows = DefaultCachedRows
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case o.TTL < 0 || o.MaxEntries < 0 || o.MaxPayload < 0 || o.KeepEpochs < 0 || o.CachedRows < 0:
		return fmt.Errorf("%w: negative window or limit", ErrConfig)
	case o.KeepEpochs > MaxKeepEpochs:
		return fmt.Errorf("%w: keep_epochs %d is above %d", ErrConfig, o.KeepEpochs, MaxKeepEpochs)
	case o.SequenceSpan < 64 || o.SequenceSpan%64 != 0:
		return fmt.Errorf("%w: sequence_span %d is not a positive multiple of 64", ErrConfig, o.SequenceSpan)
	case o.SequenceSpan > 64*maxBitmapWords:
		// A wider window's bitmap is more than a stored row may claim
		// (maxBitmapWords): it would commit, and never be read back.
		return fmt.Errorf("%w: sequence_span %d is above %d", ErrConfig, o.SequenceSpan, 64*maxBitmapWords)
	}
	return nil
}

// changedEntity is an entity the pending batch changed.
type changedEntity struct {
	name string
	ent  *entity
}

// changed adds ent to the entities the pending batch changed, once.
func (p *pending) changed(name string, ent *entity) {
	if ent.changedIn != p.gen {
		ent.changedIn = p.gen
		p.entities = append(p.entities, changedEntity{name, ent})
	}
}

// touched adds src to the sources the pending batch changed, once.
func (p *pending) touched(src *SourceState) {
	if src.changedIn != p.gen {
		src.changedIn = p.gen
		p.sources = append(p.sources, src)
	}
}

// holds reports whether the pending batch changed ent.
func (p *pending) holds(ent *entity) bool { return ent.changedIn == p.gen }

func (e *Engine) resetPending() {
	e.pending = pending{gen: e.pending.gen + 1}
}

func (e *Engine) routeFor(topic string) *route {
	for _, r := range e.routes {
		if r.match(topic) {
			return r
		}
	}
	return nil
}

// Process decides a batch of messages and commits the decisions, their
// effects and audit records in one durable transaction. On error nothing
// of the batch was committed and the in-memory windows are as they were
// before it: the caller may pass the same batch again. (On a shared store
// a batch may commit in two parts, see Reads.SkipHeld: when the second
// fails, the first is committed, and the same messages passed again keep
// the decisions it committed instead of being decided twice.) Decisions
// are returned in message order.
func (e *Engine) Process(ctx context.Context, msgs []Message) ([]Decision, error) {
	wait, err := e.Submit(ctx, msgs)
	if err != nil {
		return nil, err
	}
	return wait()
}

// Submit decides a batch now and queues its commit; wait returns once the
// commit is durable (or failed). Batches commit in the order they were
// submitted, so a caller may submit the next batch while the previous one
// commits. When a commit fails, every batch submitted after it fails too
// (they were decided on top of it, or are refused with ErrAborted until a
// wait has returned the failure) and the engine reloads the committed
// state: the caller may submit all of them again, in order. A caller that
// submits ahead must call every wait it was given.
func (e *Engine) Submit(ctx context.Context, msgs []Message) (wait func() ([]Decision, error), err error) {
	_, wait, err = e.SubmitLanded(ctx, msgs)
	return wait, err
}

// SubmitLanded is Submit with landed, closed once the batch's commit is
// durable or has failed. A caller learns of it without taking the outcome,
// which wait alone tells: until a wait has returned a failure, the batches
// submitted after it are refused (ErrAborted), so a caller that takes the
// outcomes in order, on the goroutine that submits, submits again in order.
func (e *Engine) SubmitLanded(ctx context.Context, msgs []Message) (landed <-chan struct{}, wait func() ([]Decision, error), err error) {
	if e.opts.Admit != nil {
		if err := e.opts.Admit(ctx, e.outboxEntriesInFlight); err != nil {
			return nil, nil, err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ready(ctx); err != nil {
		return nil, nil, err
	}
	return e.win.submit(ctx, msgs)
}

// outboxEntriesInFlight is Options.Admit's inFlight.
func (e *Engine) outboxEntriesInFlight() int { return int(e.outboxInFlight.Load()) }

// takeBatch turns the pending changes into a batch and starts a new one.
// Called with e.mu held.
func (e *Engine) takeBatch() *Batch {
	b := new(Batch)
	*b = e.pending.batch // resetPending below starts new slices
	if n := len(e.pending.sources); n > 0 {
		b.Sources = make([]SourceState, 0, n)
	}
	var slab Fields // the batch's entities' fields, one allocation
	if n := len(e.pending.entities); n > 0 {
		b.Entities = make([]EntityState, 0, n)
		nf := 0
		for _, c := range e.pending.entities {
			nf += len(c.ent.fields)
		}
		slab = make(Fields, nf)
	}
	var added RowCount
	for _, s := range e.pending.sources {
		if s.unstored {
			added.Sources++
			s.unstored = false
		}
		b.Sources = append(b.Sources, s.clone())
	}
	for _, c := range e.pending.entities {
		if c.ent.unstored {
			added.Entities++
			c.ent.unstored = false
		}
		var st EntityState
		st, slab = c.ent.state(c.name, slab)
		b.Entities = append(b.Entities, st)
	}
	b.NewRows = &added
	e.resetPending()
	return b
}

// ready reloads the committed state after a failed commit. Called with e.mu
// held before deciding anything.
func (e *Engine) ready(ctx context.Context) error {
	if e.closed {
		return ErrClosed
	}
	if err := e.win.retryLoss(ctx); err != nil {
		return err
	}
	if !e.reload.Swap(false) {
		return nil
	}
	if err := e.win.load(context.WithoutCancel(ctx)); err != nil {
		e.reload.Store(true)
		return fmt.Errorf("reload after a failed commit: %w", err)
	}
	return nil
}

// Close waits for queued commits, then stops the engine. It does not close
// the store, which the caller owns.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.win.close()
	return nil
}

// State returns every entity's projected state, sorted by name. On a shared
// store it is ReadState's, empty when the store cannot be read (the error is
// logged).
func (e *Engine) State() []EntityState {
	st, _, err := e.win.readState(context.Background(), 0)
	if err != nil {
		e.log.Error("read the group's state", "err", err)
	}
	return st
}

// ReadState returns every entity's state, sorted by name: on a shared
// store the group's, read from the store.
func (e *Engine) ReadState(ctx context.Context) ([]EntityState, error) {
	st, _, err := e.win.readState(ctx, 0)
	return st, err
}

// ReadStateUpTo returns the first limit entities by name, and how many
// there are: what a dashboard shows of a fleet, without holding every
// row. On a store that keeps some rows in memory only, it reads no more
// of the store than it returns.
func (e *Engine) ReadStateUpTo(ctx context.Context, limit int) ([]EntityState, int, error) {
	return e.win.readState(ctx, max(limit, 1))
}

// Sources returns every source window, as reported by `sources`. On a
// shared store it is ReadSources', empty when the store cannot be read.
func (e *Engine) Sources() []SourceReport {
	sel, err := e.win.readSources(context.Background(), 0)
	if err != nil {
		e.log.Error("read the group's sources", "err", err)
	}
	return sel.Reports
}

// ReadSources returns every source window: on a shared store the group's,
// read from the store.
func (e *Engine) ReadSources(ctx context.Context) ([]SourceReport, error) {
	sel, err := e.win.readSources(ctx, 0)
	return sel.Reports, err
}

// ReadSourcesUpTo returns up to limit source windows, those with open
// gaps first, and how many windows and open gaps there are in all: what a
// dashboard shows of a fleet, holding no more than 2 × limit reports at
// once.
func (e *Engine) ReadSourcesUpTo(ctx context.Context, limit int) (SourceSelection, error) {
	return e.win.readSources(ctx, max(limit, 1))
}

// CountGaps returns the number of source windows and the sequences
// missing in their kept epochs (SourceReport.OpenGaps summed), without
// holding the windows: what the metrics read at each scrape. On a shared
// store it reads the group's windows from the store.
func (e *Engine) CountGaps(ctx context.Context) (sources int, gaps int64, err error) {
	return e.win.countGaps(ctx)
}

// Member is the shared store's member id whose chain this engine writes;
// empty on a single-owner store.
func (e *Engine) Member() string {
	id, _ := e.win.member()
	return id
}

// Stats are the engine's window sizes.
type Stats struct {
	Keys    int // entries in the key window
	MaxKeys int // its bound, window.max_entries
	// OldestKey is when the oldest key in the window was applied (unix
	// nanoseconds by the engine's key clock; 0 when the window is empty):
	// how far back the window reaches. Once the window holds MaxKeys, a
	// key leaves it by count before its ttl, and an id route's replay of
	// a message applied before OldestKey is applied again.
	OldestKey int64
	Sources   int    // source windows
	Entities  int    // projected entities
	Position  uint64 // last committed audit position
	Head      Hash   // that record's hash (zero before the first)
	Shared    bool   // on a shared store: only Position is set, this member's
}

// Committing reports when the store's commit under way began: an
// owned store's Commit, or a shared store's Update (its reads, waits for
// rows other members hold, writes and sql effects). ok is false when no
// commit is under way.
func (e *Engine) Committing() (since time.Time, ok bool) {
	if n := e.committing.Load(); n != 0 {
		return time.Unix(0, n), true
	}
	return time.Time{}, false
}

// commitStarted marks a store commit under way, until the function it
// returns is called.
func (e *Engine) commitStarted() func() {
	e.committing.Store(time.Now().UnixNano())
	return func() { e.committing.Store(0) }
}

// Stats returns the current window sizes. On a shared store, whose windows
// the engine does not hold, only Position is set: this member's.
func (e *Engine) Stats() Stats { return e.win.stats() }

// HoldsDecisions reports whether the store holds a decision: this
// engine's, or on a shared store any member's chain's (a member that has
// decided nothing yet joins a group that has).
func (e *Engine) HoldsDecisions(ctx context.Context) (bool, error) {
	if e.Stats().Position > 0 {
		return true, nil
	}
	cs := e.caps.Chains
	if cs == nil {
		return false, nil
	}
	chains, err := cs.Chains(ctx)
	if err != nil {
		return false, err
	}
	for _, c := range chains {
		if c.Head.Position > 0 {
			return true, nil
		}
	}
	return false, nil
}
