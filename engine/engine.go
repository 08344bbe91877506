package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
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
)

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
	// nil: every batch is admitted.
	Admit func(ctx context.Context) error
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
	shared     SharedStore           // caps.Shared: nil on a single-owner store
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
	refused  SQLRefusals // keys whose sql effects the store refused, for this batch
	// resolving are the held outbox entries (Requeue false) whose
	// resolution is being committed.
	resolving map[OutboxResolve]bool
	tail      AuditHead // chain head including decided, uncommitted records
	evicted   uint64    // EvictBelow last sealed
	pending   pending
	closed    bool
	gen       uint64 // state generation: bumped by every reload after a failed commit

	queue        chan *commitJob // sealed batches, to the committer
	stopped      chan struct{}   // closed when the committer returns
	committedGen atomic.Uint64   // the generation the committer accepts
	reload       atomic.Bool     // a commit failed: reload before deciding

	headMu sync.Mutex
	head   AuditHead // committed chain head

	journal   Journal // nil: none, or a single-owner store
	storeName string
	lossMu    sync.Mutex
	loss      *StoreLoss // a loss that stops deciding until recovered or accepted
	lossStats LossStats
}

type pending struct {
	batch    Batch
	sources  map[*SourceState]struct{}
	entities map[string]struct{}
	seqs     []int64 // what the batch's audit records' Sequence point to
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
	if sh := caps.Shared; sh != nil {
		e.shared, e.member, e.qbase = sh, sh.Member(), sh.QuarantineBase()
		e.journal = opts.Journal
	}
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
	if err := e.load(ctx); err != nil && !errors.As(err, new(*StoreLoss)) {
		return nil, err // a store loss leaves the engine stopped, not unopened: readiness says why
	}
	e.queue, e.stopped = make(chan *commitJob, 4), make(chan struct{})
	go e.committer(e.queue)
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
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case o.TTL < 0 || o.MaxEntries < 0 || o.MaxPayload < 0 || o.KeepEpochs < 0:
		return fmt.Errorf("%w: negative window or limit", ErrConfig)
	case o.SequenceSpan < 64 || o.SequenceSpan%64 != 0:
		return fmt.Errorf("%w: sequence_span %d is not a positive multiple of 64", ErrConfig, o.SequenceSpan)
	}
	return nil
}

// load (re)builds the in-memory state from the store.
func (e *Engine) load(ctx context.Context) error {
	if e.shared != nil { // the store keeps the windows: only the chain head is this member's
		return e.loadShared(ctx)
	}
	snap, err := e.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("load store: %w", err)
	}
	e.keys = newKeyWindow(e.opts.MaxEntries, snap.NextKey)
	for _, k := range snap.Keys {
		e.keys.add(k.Key, k.Digest, k.Time, k.Ordinal)
	}
	e.evicted = 0
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
	return nil
}

// loadShared reads this member's chain head from a shared store and
// compares it with the one the member committed: a store that lost
// commits is recovered, or stops the engine (the error is the
// *StoreLoss).
func (e *Engine) loadShared(ctx context.Context) error {
	known := e.known() // before the head read here replaces the one in memory
	head, err := e.shared.Head(ctx)
	if err != nil {
		return fmt.Errorf("load store: %w", err)
	}
	e.keys = newKeyWindow(e.opts.MaxEntries, 0)
	e.evicted = 0
	e.sources = map[string]*SourceState{}
	e.entities = map[string]*entity{}
	return e.checkHead(ctx, head, known)
}

func (e *Engine) resetPending() {
	e.pending = pending{sources: map[*SourceState]struct{}{}, entities: map[string]struct{}{}}
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
// before it: the caller may pass the same batch again. Decisions are
// returned in message order.
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
// (they were decided on top of it) and the engine reloads the committed
// state: the caller may submit all of them again, in order.
func (e *Engine) Submit(ctx context.Context, msgs []Message) (wait func() ([]Decision, error), err error) {
	if e.opts.Admit != nil {
		if err := e.opts.Admit(ctx); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ready(ctx); err != nil {
		return nil, err
	}
	if e.shared != nil {
		out, err := e.submitShared(ctx, msgs)
		return func() ([]Decision, error) { return out, err }, nil
	}
	now := e.opts.Now()
	e.keys.expire(now.Add(-e.ttl).UnixNano())
	out := make([]Decision, len(msgs))
	if b := &e.pending.batch; b.Audit == nil { // room for the batch: no copying as it grows
		b.Audit, b.Keys = make([]AuditRecord, 0, len(msgs)), make([]KeyEntry, 0, len(msgs))
	}
	for i := range msgs {
		out[i] = e.decideOne(&msgs[i], now, 0, "")
	}
	c := e.seal(ctx)
	return func() ([]Decision, error) {
		<-c.done
		if c.err != nil {
			return nil, c.err
		}
		return out, nil
	}, nil
}

// commitJob is one sealed batch on its way to the store.
type commitJob struct {
	ctx   context.Context
	batch *Batch
	gen   uint64 // the state generation it was decided in
	head  AuditHead
	done  chan struct{}
	err   error
}

// seal turns the pending changes into a batch and queues it for the
// committer. Called with e.mu held.
func (e *Engine) seal(ctx context.Context) *commitJob {
	b := e.takeBatch()
	c := &commitJob{ctx: ctx, batch: b, gen: e.gen, head: e.tail, done: make(chan struct{})}
	e.queue <- c
	return c
}

// takeBatch turns the pending changes into a batch and starts a new one.
// Called with e.mu held.
func (e *Engine) takeBatch() *Batch {
	b := new(Batch)
	*b = e.pending.batch // resetPending below starts new slices
	if e.shared == nil { // a shared store prunes its own keys
		b.NextKey = e.keys.next
		if old := e.keys.oldest(); old > e.evicted {
			b.EvictBelow = old
			e.evicted = old
		}
	}
	for s := range e.pending.sources {
		b.Sources = append(b.Sources, s.clone())
	}
	for name := range e.pending.entities {
		b.Entities = append(b.Entities, e.entities[name].state(name))
	}
	e.resetPending()
	return b
}

// committer writes sealed batches in order. It is the only caller of
// store.Commit, and stops when the queue is closed.
func (e *Engine) committer(queue <-chan *commitJob) {
	defer close(e.stopped)
	for c := range queue {
		c.err = e.commitOne(c)
		close(c.done)
	}
}

func (e *Engine) commitOne(c *commitJob) error {
	if c.gen != e.committedGen.Load() {
		return fmt.Errorf("%w: a batch before it failed to commit", ErrAborted)
	}
	if err := e.store.Commit(c.ctx, c.batch); err != nil {
		// Batches decided on top of this one fail from now on; the next
		// caller to take the engine's lock reloads the committed state.
		// Taking the lock here could deadlock with a caller that holds it
		// while waiting for room in the queue.
		e.log.Error("commit failed; the committed state will be reloaded", "err", err, "records", len(c.batch.Audit))
		e.committedGen.Add(1)
		e.reload.Store(true)
		return fmt.Errorf("commit: %w", err)
	}
	e.headMu.Lock()
	e.head = c.head
	e.headMu.Unlock()
	e.observe(c.batch)
	return nil
}

// ready reloads the committed state after a failed commit. Called with e.mu
// held before deciding anything.
func (e *Engine) ready(ctx context.Context) error {
	if e.closed {
		return ErrClosed
	}
	if l := e.Loss(); l != nil {
		if err := e.retryLoss(ctx, l); err != nil {
			return err
		}
	}
	if !e.reload.Swap(false) {
		return nil
	}
	if err := e.load(context.WithoutCancel(ctx)); err != nil {
		e.reload.Store(true)
		return fmt.Errorf("reload after a failed commit: %w", err)
	}
	e.gen = e.committedGen.Load()
	return nil
}

// Close waits for queued commits, then stops the engine. It does not close
// the store, which the caller owns.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed && e.queue == nil {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	q := e.queue
	e.queue = nil
	e.mu.Unlock()
	if q != nil {
		close(q)
		<-e.stopped
	}
	return nil
}

// State returns every entity's projected state, sorted by name. On a shared
// store it is ReadState's, empty when the store cannot be read (the error is
// logged).
func (e *Engine) State() []EntityState {
	if e.shared != nil {
		st, err := e.ReadState(context.Background())
		if err != nil {
			e.log.Error("read the group's state", "err", err)
		}
		return st
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]EntityState, 0, len(e.entities))
	for name, ent := range e.entities {
		out = append(out, ent.state(name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Sources returns every source window, as reported by `sources`. On a
// shared store it is ReadSources', empty when the store cannot be read.
func (e *Engine) Sources() []SourceReport {
	if e.shared != nil {
		r, err := e.ReadSources(context.Background())
		if err != nil {
			e.log.Error("read the group's sources", "err", err)
		}
		return r
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	states := make([]SourceState, 0, len(e.sources))
	for _, s := range e.sources {
		states = append(states, *s)
	}
	return SourceReports(states)
}

// Stats are the engine's window sizes.
type Stats struct {
	Keys     int    // entries in the key window
	Sources  int    // source windows
	Entities int    // projected entities
	Position uint64 // last committed audit position
	Shared   bool   // on a shared store: only Position is set, this member's
}

// Stats returns the current window sizes. On a shared store, whose windows
// the engine does not hold, only Position is set: this member's.
func (e *Engine) Stats() Stats {
	if e.shared != nil {
		e.headMu.Lock()
		defer e.headMu.Unlock()
		return Stats{Position: e.head.Position, Shared: true}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.headMu.Lock()
	defer e.headMu.Unlock()
	return Stats{Keys: e.keys.len(), Sources: len(e.sources), Entities: len(e.entities), Position: e.head.Position}
}
