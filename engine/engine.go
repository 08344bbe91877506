package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
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
}

// Observer hears about every durable commit.
type Observer interface {
	// Committed is called after each commit, in commit order, on the
	// committing goroutine with the engine locked: it must not block nor
	// call back into the engine. The slices must not be retained.
	Committed(records []AuditRecord, entities []EntityState)
}

// Engine decides messages against durable windows and commits each batch
// of decisions, effects and audit records atomically. Its methods are safe
// for concurrent use; decisions are serialised.
type Engine struct {
	mu         sync.Mutex
	store      Store
	quar       QuarantineScanner
	opts       Options
	log        *slog.Logger
	routes     []*route
	maxPayload int
	ttl        time.Duration

	keys     *keyWindow
	sources  map[string]*SourceState
	entities map[string]*entity
	head     AuditHead // committed chain head
	tail     AuditHead // head including pending records
	evicted  uint64    // EvictBelow last committed
	pending  pending
	closed   bool
}

type pending struct {
	batch    Batch
	sources  map[*SourceState]struct{}
	entities map[string]struct{}
}

// New loads the store's state and returns an engine over it. The store
// must also implement QuarantineScanner.
func New(ctx context.Context, store Store, opts Options) (*Engine, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	quar, ok := store.(QuarantineScanner)
	if !ok {
		return nil, fmt.Errorf("%w: store %T cannot scan its quarantine", ErrConfig, store)
	}
	e := &Engine{store: store, quar: quar, opts: opts, log: opts.Logger, maxPayload: opts.MaxPayload, ttl: opts.TTL}
	names := map[string]bool{}
	for _, r := range opts.Routes {
		c, err := compileRoute(r)
		if err != nil {
			return nil, err
		}
		if names[r.Name] {
			return nil, fmt.Errorf("%w: route %q defined twice", ErrConfig, r.Name)
		}
		names[r.Name] = true
		e.routes = append(e.routes, c)
	}
	if err := e.load(ctx); err != nil {
		return nil, err
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
	e.head, e.tail = snap.AuditHead, snap.AuditHead
	e.resetPending()
	return nil
}

func (e *Engine) resetPending() {
	e.pending = pending{sources: map[*SourceState]struct{}{}, entities: map[string]struct{}{}}
	e.tail = e.head
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
// was committed and the in-memory windows are as before: the caller may
// pass the same batch again. Decisions are returned in message order.
func (e *Engine) Process(ctx context.Context, msgs []Message) ([]Decision, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	now := e.opts.Now()
	e.keys.expire(now.Add(-e.ttl).UnixNano())
	out := make([]Decision, len(msgs))
	for i := range msgs {
		out[i] = e.decideOne(&msgs[i], now, 0)
	}
	if err := e.commit(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// commit writes the pending batch; on failure it reloads the committed state.
func (e *Engine) commit(ctx context.Context) error {
	b := &e.pending.batch
	b.NextKey = e.keys.next
	if old := e.keys.oldest(); old > e.evicted {
		b.EvictBelow = old
	}
	for s := range e.pending.sources {
		b.Sources = append(b.Sources, *s)
	}
	for name := range e.pending.entities {
		b.Entities = append(b.Entities, e.entities[name].state(name))
	}
	if err := e.store.Commit(ctx, b); err != nil {
		e.log.Error("commit failed; reloading committed state", "err", err, "records", len(b.Audit))
		if lerr := e.load(context.WithoutCancel(ctx)); lerr != nil {
			e.closed = true
			return fmt.Errorf("commit: %w (and reload failed, engine closed: %v)", err, lerr)
		}
		return fmt.Errorf("commit: %w", err)
	}
	if b.EvictBelow > 0 {
		e.evicted = b.EvictBelow
	}
	e.head = e.tail
	if e.opts.Observer != nil && len(b.Audit) > 0 {
		e.opts.Observer.Committed(b.Audit, b.Entities)
	}
	e.resetPending()
	return nil
}

// Close marks the engine closed; it does not close the store, which the
// caller owns.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	return nil
}

// State returns every entity's projected state, sorted by name.
func (e *Engine) State() []EntityState {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]EntityState, 0, len(e.entities))
	for name, ent := range e.entities {
		out = append(out, ent.state(name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Sources returns every source window, as reported by `sources`.
func (e *Engine) Sources() []SourceReport {
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
}

// Stats returns the current window sizes.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Stats{Keys: e.keys.len(), Sources: len(e.sources), Entities: len(e.entities), Position: e.head.Position}
}
