package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/httpretry"
)

// Defaults for Options fields left zero.
const (
	DefaultBatch      = 512
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	DefaultTick       = 5 * time.Second
)

// ErrUndelivered is returned by Flush when a sink could not deliver up to
// the head before its context ended; the rest stays behind its cursor.
var ErrUndelivered = errors.New("audit sink: records left undelivered")

// Exporter delivers records to one downstream system.
type Exporter interface {
	// Export delivers recs, in order. nil means every record was delivered
	// (what "delivered" means is the exporter's: see each one's doc); an
	// error means any of them may not have been, and they are exported
	// again. Export is called by one goroutine at a time.
	Export(ctx context.Context, recs []engine.AuditRecord) error
	// Close releases the exporter's connections and files.
	Close(ctx context.Context) error
}

// oversizer is an Exporter that sends a record too large for its receiver
// as a stub (Syslog), and counts them.
type oversizer interface {
	// Oversize returns how many records were sent as stubs so far.
	Oversize() uint64
}

// Store is what the sinks read and write in a single-owner store.
type Store interface {
	engine.AuditScanner
	engine.CursorStore
}

// Sink is one named exporter. The name keys its cursor in the store and
// labels its metrics.
type Sink struct {
	Name     string
	Exporter Exporter
}

// Options configure New and NewChains.
type Options struct {
	Sinks []Sink
	// Member is the member whose chain this process writes, on a shared
	// store (NewChains): SetHead advances its chain's head, and Status
	// reports the cursors on it. Default "" (a single-owner store's log,
	// which New requires).
	Member string
	// Head is the position of the committed chain head at start; Committed
	// advances it. Default 0.
	Head uint64
	// Batch bounds the records of one Export. Default DefaultBatch.
	Batch int
	// MinBackoff and MaxBackoff bound the jittered, doubling wait after a
	// failed delivery. Defaults DefaultMinBackoff, DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Tick wakes every sink this often even without a commit. Default
	// DefaultTick.
	Tick time.Duration
	// Logger receives a line per failed delivery, naming the sink.
	// Default: discard.
	Logger *slog.Logger
}

// Set runs the configured sinks over the chains it is given: a
// single-owner store's log (New), or the members' chains of a shared store
// that SetChains hands it (NewChains). Each sink delivers every chain on
// one goroutine, in position order per chain, and keeps a cursor per chain
// in the store. It implements engine.Observer and, for its metrics,
// prometheus.Collector.
type Set struct {
	logs  chainLogs
	opts  Options
	log   *slog.Logger
	sinks []*runner

	mu      sync.Mutex
	chains  []string             // the chains to deliver, ascending
	heads   map[string]uint64    // each chain's committed head, as far as known
	flights map[*flight]struct{} // the deliveries in progress
}

// flight is one delivery in progress: a batch of chain being read,
// exported and its cursor saved.
type flight struct {
	chain  string
	cancel context.CancelFunc
	done   chan struct{} // closed once the delivery ended
}

// runner is one sink's delivery state.
type runner struct {
	Sink
	wake      chan struct{}
	mu        sync.Mutex
	cursors   map[string]uint64  // by chain, once read from the store
	rewinds   map[string]uint64  // by chain, how often rewind moved its cursor back
	recent    map[string]*recent // by chain, the records delivered last
	delivered atomic.Uint64
	failures  atomic.Uint64
}

// New returns a set of sinks over a single-owner store. Names must be
// unique and not empty.
func New(store Store, opts Options) (*Set, error) {
	if opts.Member != "" {
		return nil, fmt.Errorf("audit sink: member %q: a member's chain of a shared store is NewChains'", opts.Member)
	}
	s, err := newSet(ownerLogs{store}, opts)
	if err != nil {
		return nil, err
	}
	s.chains = []string{""}
	return s, nil
}

func newSet(logs chainLogs, opts Options) (*Set, error) {
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.Tick <= 0 {
		opts.Tick = DefaultTick
	}
	s := &Set{logs: logs, opts: opts, log: opts.Logger, heads: map[string]uint64{opts.Member: opts.Head},
		flights: map[*flight]struct{}{}}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	seen := map[string]bool{}
	for _, k := range opts.Sinks {
		if k.Name == "" || seen[k.Name] || k.Exporter == nil {
			return nil, fmt.Errorf("audit sink: name %q is empty, repeated or has no exporter", k.Name)
		}
		seen[k.Name] = true
		s.sinks = append(s.sinks, &runner{Sink: k, wake: make(chan struct{}, 1), cursors: map[string]uint64{}, rewinds: map[string]uint64{}, recent: map[string]*recent{}})
	}
	return s, nil
}

// Committed advances the head of the records' chain and wakes every sink.
// A commit at or below a sink's cursor is a chain that went back: its
// store lost the member's last commits (a failover to a standby that
// lacked them) and the member decided them again, into other records at
// the positions the sink had delivered. The sink's cursor then goes back
// to just before the commit, so that it delivers them. It never blocks.
func (s *Set) Committed(recs []engine.AuditRecord, _ []engine.EntityState) {
	if len(recs) == 0 {
		return
	}
	first, last := recs[0], recs[len(recs)-1]
	for _, r := range s.sinks {
		r.rewind(first)
	}
	s.raise(last.Member, last.Position)
	s.wakeAll()
}

// SetHead raises the head of the member's own chain (Options.Member), the
// one the backlog is measured against, to pos.
func (s *Set) SetHead(pos uint64) { s.raise(s.opts.Member, pos) }

// raise raises chain's head to pos.
func (s *Set) raise(chain string, pos uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pos > s.heads[chain] {
		s.heads[chain] = pos
	}
}

func (s *Set) wakeAll() {
	for _, r := range s.sinks {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// given returns the chains to deliver now.
func (s *Set) given() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.chains)
}

// Run delivers on one goroutine per sink until ctx is done, then returns
// once all of them have stopped.
func (s *Set) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range s.sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx, r)
		}()
	}
	wg.Wait()
}

func (s *Set) run(ctx context.Context, r *runner) {
	tick := time.NewTicker(s.opts.Tick)
	defer tick.Stop()
	backoff := time.Duration(0)
	for {
		if err := s.catchUp(ctx, r); err != nil {
			// Back off, whatever commits meanwhile: the records wait in
			// the store behind the cursor.
			backoff = min(max(2*backoff, s.opts.MinBackoff), s.opts.MaxBackoff)
			wait := backoff/2 + rand.N(backoff/2+1) // jitter in [backoff/2, backoff]
			s.sleep(ctx, httpretry.Wait(err, wait)) // or what the receiver asked for
		} else {
			backoff = 0
			select {
			case <-ctx.Done():
			case <-tick.C:
			case <-r.wake:
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (s *Set) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// catchUp delivers batches until the store has no record after the
// sink's cursor on any chain it is given that has not failed. It takes a
// batch of each chain in turn, so that a long backlog on one chain does
// not hold up the others; a chain that fails waits for the next call, and
// neither holds up the others. It returns the failures, joined.
func (s *Set) catchUp(ctx context.Context, r *runner) error {
	var errs []error
	failed := map[string]bool{}
	for {
		moved := false
		for _, chain := range s.given() {
			if failed[chain] {
				continue
			}
			n, err := s.deliver(ctx, r, chain)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				r.failures.Add(1)
				s.log.Error("audit sink delivery failed; retrying from its cursor", append(sinkAttrs(r.Name, chain),
					"cursor", r.cursor(chain), "err", err)...)
				failed[chain] = true
				errs = append(errs, err)
				continue
			}
			moved = moved || n > 0
		}
		if !moved {
			return errors.Join(errs...)
		}
	}
}

// sinkAttrs name a sink and, on a shared store, the member whose chain it
// delivers, in a log line.
func sinkAttrs(sink, chain string) []any {
	if chain == "" {
		return []any{"sink", sink}
	}
	return []any{"sink", sink, "member", chain}
}

// errBatchFull stops a scan once a batch is full.
var errBatchFull = errors.New("batch full")

// deliver exports the next batch of chain after the sink's cursor and then
// advances the cursor in the store. It returns how many records it
// delivered. A chain not given delivers nothing; one taken away meanwhile
// (SetChains) has its batch cancelled, and delivers nothing either.
func (s *Set) deliver(ctx context.Context, r *runner, chain string) (int, error) {
	fctx, land, ok := s.fly(ctx, chain)
	if !ok {
		return 0, nil
	}
	defer land()
	n, err := s.deliverBatch(fctx, r, chain)
	if err != nil && fctx.Err() != nil && ctx.Err() == nil {
		return 0, nil // taken away: whoever has the chain next delivers it from the cursor in the store
	}
	return n, err
}

// fly starts a delivery of chain, unless the chain is not given; land
// ends it. SetChains cancels the deliveries of a chain it takes away and
// waits for them to land.
func (s *Set) fly(ctx context.Context, chain string) (_ context.Context, land func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.chains, chain) {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &flight{chain: chain, cancel: cancel, done: make(chan struct{})}
	s.flights[f] = struct{}{}
	return ctx, func() {
		s.mu.Lock()
		delete(s.flights, f)
		s.mu.Unlock()
		cancel()
		close(f.done)
	}, true
}

// deliverBatch is deliver's work once the delivery started.
func (s *Set) deliverBatch(ctx context.Context, r *runner, chain string) (int, error) {
	rewinds := r.rewound(chain)
	c, err := s.loadCursor(ctx, r, chain)
	if err != nil {
		return 0, fmt.Errorf("read cursor: %w", err)
	}
	from := c + 1
	batch := make([]engine.AuditRecord, 0, min(s.opts.Batch, 64))
	err = s.logs.scan(ctx, chain, from, func(rec engine.AuditRecord) error {
		batch = append(batch, rec)
		if len(batch) >= s.opts.Batch {
			return errBatchFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errBatchFull) {
		return 0, fmt.Errorf("read the audit log from position %d: %w", from, err)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	if batch[0].Position != from {
		// Retention dropped records this sink never delivered: say so
		// loudly, and go on from what the store still holds.
		s.log.Error("audit sink missed records the store no longer holds (they are in the audit archive)",
			append(sinkAttrs(r.Name, chain), "from", from, "to", batch[0].Position-1)...)
	}
	if err := r.Exporter.Export(ctx, batch); err != nil {
		return 0, err
	}
	lastRec := batch[len(batch)-1]
	last := lastRec.Position
	if r.rewound(chain) != rewinds {
		// The chain went back below the batch meanwhile: the records the
		// member decided again at its positions go next.
		r.delivered.Add(uint64(len(batch)))
		return len(batch), nil
	}
	err = s.logs.setCursor(ctx, chain, r.Name, engine.AuditHead{Position: last, Hash: lastRec.Hash})
	if errors.Is(err, engine.ErrCursorRecord) {
		// The batch was read from a store that failed over since, to a
		// standby lacking its records: the chain holds others at those
		// positions, or none yet. The rewind on a commit at or below the
		// cursor may have come after the check above; the cursor in the
		// store stays where the chain still holds what it names, so a
		// restart delivers them too, and this one reads them next.
		s.log.Warn("audit sink delivered records the store no longer holds (a failover); delivering the chain's from its cursor",
			append(sinkAttrs(r.Name, chain), "from", from, "to", last)...)
		r.delivered.Add(uint64(len(batch)))
		return len(batch), nil
	}
	if err != nil {
		return 0, fmt.Errorf("save cursor %d: %w", last, err)
	}
	r.advance(chain, batch, rewinds)
	r.delivered.Add(uint64(len(batch)))
	s.raise(chain, last)
	return len(batch), nil
}

// loadCursor returns the sink's cursor on chain, read from the store the
// first time the chain is delivered since it was given.
func (s *Set) loadCursor(ctx context.Context, r *runner, chain string) (uint64, error) {
	r.mu.Lock()
	c, ok := r.cursors[chain]
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := s.logs.cursor(ctx, chain, r.Name)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	if slices.Contains(s.chains, chain) { // else taken away meanwhile: read it again when given again
		r.mu.Lock()
		r.cursors[chain] = c
		r.mu.Unlock()
	}
	s.mu.Unlock()
	s.raise(chain, c)
	return c, nil
}

// advance moves the sink's cursor on chain to the end of batch, which it
// delivered, unless the chain was taken away meanwhile, or its cursor was
// rewound since the batch read it (rewinds, as rewound returned then,
// says which).
func (r *runner) advance(chain string, batch []engine.AuditRecord, rewinds uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cursors[chain]; ok && r.rewinds[chain] == rewinds {
		r.cursors[chain] = batch[len(batch)-1].Position
		rc := r.recent[chain]
		if rc == nil {
			rc = new(recent)
			r.recent[chain] = rc
		}
		for _, rec := range batch {
			rc.put(rec)
		}
	}
}

// rewind moves the sink's cursor on first's chain back to just before
// first, the first record of a commit, when the chain went back under the
// cursor: the sink delivered another record at first's position (the
// store lost the member's commits and the member decided them again), or
// one it no longer knows. A commit the sink already delivered as it is
// (it reads the store, which holds a commit before the commit is told)
// moves nothing.
func (r *runner) rewind(first engine.AuditRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	chain := first.Member
	c, ok := r.cursors[chain]
	if !ok || c < first.Position {
		return
	}
	if rc := r.recent[chain]; rc != nil && rc.holds(first) {
		return
	}
	r.cursors[chain] = first.Position - 1
	r.rewinds[chain]++
}

// recentRecords is how many of the records a sink delivered last on a
// chain it remembers by position, to tell a commit it delivered already
// from a chain that went back.
const recentRecords = 8192

// recent holds the hashes of the records a sink delivered last on a
// chain, by position modulo recentRecords.
type recent [recentRecords]struct {
	pos  uint64
	hash engine.Hash
}

func (rc *recent) put(rec engine.AuditRecord) {
	rc[rec.Position%recentRecords] = struct {
		pos  uint64
		hash engine.Hash
	}{rec.Position, rec.Hash}
}

// holds reports whether the sink delivered rec as it is.
func (rc *recent) holds(rec engine.AuditRecord) bool {
	e := rc[rec.Position%recentRecords]
	return e.pos == rec.Position && e.hash == rec.Hash
}

// rewound returns how often chain's cursor was rewound.
func (r *runner) rewound(chain string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rewinds[chain]
}

// cursor is the sink's cursor on chain as far as it knows; 0 before it
// read it.
func (r *runner) cursor(chain string) uint64 {
	c, _ := r.cursorRead(chain)
	return c
}

// cursorRead is cursor, and whether the sink read it from the store.
func (r *runner) cursorRead(chain string) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.cursors[chain]
	return c, ok
}

// Flush delivers, on the calling goroutine, what every sink can up to the
// current head of every chain it is given before ctx ends, each sink on
// its own. It returns ErrUndelivered naming the sinks left behind; their
// cursors keep the rest.
func (s *Set) Flush(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.sinks))
	heads := s.givenHeads()
	for i, r := range s.sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			backoff := s.opts.MinBackoff
			for {
				err := s.catchUp(ctx, r)
				if r.behind(heads) == "" || ctx.Err() != nil || err == nil {
					break
				}
				s.sleep(ctx, backoff)
				backoff = min(2*backoff, s.opts.MaxBackoff)
			}
			if b := r.behind(heads); b != "" {
				errs[i] = fmt.Errorf("%w: sink %s delivered %s", ErrUndelivered, r.Name, b)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// FlushUntilIdle is Flush for as long as the sinks make progress: it
// gives up once no sink delivered a record for idle, or ctx ends. A sink
// that is slow but moving is waited for to the end; one that is down
// holds it idle for at most idle.
func (s *Set) FlushUntilIdle(ctx context.Context, idle time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.cancelWhenIdle(ctx, cancel, idle)
	}()
	err := s.Flush(ctx)
	cancel()
	<-watched
	return err
}

// cancelWhenIdle calls cancel once the sinks delivered nothing for idle,
// checking ten times per idle period, and returns then or when ctx ends.
func (s *Set) cancelWhenIdle(ctx context.Context, cancel context.CancelFunc, idle time.Duration) {
	tick := time.NewTicker(max(idle/10, time.Millisecond))
	defer tick.Stop()
	last, moved := s.progress(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if p := s.progress(); p != last {
				last, moved = p, now
			} else if now.Sub(moved) >= idle {
				cancel()
				return
			}
		}
	}
}

// progress counts the records every sink delivered so far: it moves with
// any sink's cursor.
func (s *Set) progress() uint64 {
	var n uint64
	for _, r := range s.sinks {
		n += r.delivered.Load()
	}
	return n
}

// givenHeads are the heads of the chains given now.
func (s *Set) givenHeads() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.chains))
	for _, c := range s.chains {
		out[c] = s.heads[c]
	}
	return out
}

// behind says which chains the sink has not delivered up to heads: ""
// when none.
func (r *runner) behind(heads map[string]uint64) string {
	var out []string
	for _, chain := range slices.Sorted(maps.Keys(heads)) {
		c, h := r.cursor(chain), heads[chain]
		switch {
		case c >= h:
		case chain == "":
			out = append(out, fmt.Sprintf("up to %d of %d", c, h))
		default:
			out = append(out, fmt.Sprintf("member %s's chain up to %d of %d", chain, c, h))
		}
	}
	return strings.Join(out, ", ")
}

// Close closes every exporter.
func (s *Set) Close(ctx context.Context) error {
	var errs []error
	for _, r := range s.sinks {
		if err := r.Exporter.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("audit sink %s: %w", r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Status is one sink's delivery state.
type Status struct {
	Name string
	// Cursor is the sink's cursor on the member's own chain
	// (Options.Member; a single-owner store's log). CursorRead is false
	// until the sink read it from the store, at its first delivery: Cursor
	// is 0 until then, whatever the store keeps.
	Cursor     uint64
	CursorRead bool
	// Backlog is what the sink has yet to deliver, summed over the chains
	// it is given.
	Backlog             uint64
	Delivered, Failures uint64
	// Oversize counts the records sent as stubs, too large for the
	// receiver (a syslog sink's max_message); always 0 for other sinks.
	Oversize uint64
}

// Status returns every sink's state, in configuration order.
func (s *Set) Status() []Status {
	heads := s.givenHeads()
	out := make([]Status, len(s.sinks))
	for i, r := range s.sinks {
		st := Status{Name: r.Name, Delivered: r.delivered.Load(), Failures: r.failures.Load()}
		st.Cursor, st.CursorRead = r.cursorRead(s.opts.Member)
		if o, ok := r.Exporter.(oversizer); ok {
			st.Oversize = o.Oversize()
		}
		for chain, h := range heads {
			st.Backlog += h - min(r.cursor(chain), h)
		}
		out[i] = st
	}
	return out
}
