package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
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
// once all of them have stopped. A batch in flight when ctx ends is
// cancelled: whatever the receiver took of it is delivered again from the
// cursor (at least once).
func (s *Set) Run(ctx context.Context) { s.runUntil(ctx, nil) }

// Stream delivers as Run does until finish is called. finish lets every
// batch in flight land and its cursor be saved, then delivers on the
// calling goroutine, as FlushUntilIdle does, what the sinks can up to the
// heads the chains have then: for as long as they make progress, giving
// up once none delivered a record for idle. No record is delivered twice
// at the handover; one in a batch that a receiver hung on past idle is
// delivered again by the next delivery from the cursor (at least once).
// finish returns ErrUndelivered naming the sinks left behind; calls after
// the first return nil at once. ctx ending stops the stream, as it stops
// Run.
func (s *Set) Stream(ctx context.Context, idle time.Duration) (finish func() error) {
	ctx, cancel := context.WithCancel(ctx)
	finishing, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		s.runUntil(ctx, finishing)
	}()
	var once sync.Once
	return func() (err error) {
		once.Do(func() {
			defer cancel()
			close(finishing)
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				s.cancelWhenIdle(ctx, cancel, idle)
			}()
			<-stopped
			err = s.Flush(ctx)
			cancel()
			<-watched
		})
		return err
	}
}

// runUntil is Run that also returns once stopped is closed (nil: never),
// between two batches.
func (s *Set) runUntil(ctx context.Context, stopped <-chan struct{}) {
	var wg sync.WaitGroup
	for _, r := range s.sinks {
		wg.Go(func() { s.run(ctx, r, stopped) })
	}
	wg.Wait()
}

func (s *Set) run(ctx context.Context, r *runner, stopped <-chan struct{}) {
	tick := time.NewTicker(s.opts.Tick)
	defer tick.Stop()
	backoff := time.Duration(0)
	for {
		if err := s.catchUp(ctx, r, stopped); err != nil {
			// Back off, whatever commits meanwhile: the records wait in
			// the store behind the cursor.
			backoff = min(max(2*backoff, s.opts.MinBackoff), s.opts.MaxBackoff)
			wait := backoff/2 + rand.N(backoff/2+1)          // jitter in [backoff/2, backoff]
			s.sleep(ctx, stopped, httpretry.Wait(err, wait)) // or what the receiver asked for
		} else {
			backoff = 0
			select {
			case <-ctx.Done():
			case <-stopped:
			case <-tick.C:
			case <-r.wake:
			}
		}
		if ctx.Err() != nil || isClosed(stopped) {
			return
		}
	}
}

// sleep waits for d, or until ctx ends or stopped is closed.
func (s *Set) sleep(ctx context.Context, stopped <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-stopped:
	case <-t.C:
	}
}

// isClosed says whether c is closed; a nil c never is.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// catchUp delivers batches until the store has no record after the
// sink's cursor on any chain it is given that has not failed, or stopped
// is closed (nil: never). It takes a batch of each chain in turn, so that
// a long backlog on one chain does not hold up the others; a chain that
// fails waits for the next call, and neither holds up the others. It
// returns the failures, joined.
func (s *Set) catchUp(ctx context.Context, r *runner, stopped <-chan struct{}) error {
	var errs []error
	failed := map[string]bool{}
	for {
		moved := false
		for _, chain := range s.given() {
			if isClosed(stopped) {
				return errors.Join(errs...)
			}
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
