package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
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

// Store is what the sinks read and write in the store.
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

// Options configure New.
type Options struct {
	Sinks []Sink
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

// Set runs the configured sinks over one store. It implements
// engine.Observer and, for its metrics, prometheus.Collector.
type Set struct {
	store Store
	opts  Options
	log   *slog.Logger
	head  atomic.Uint64
	sinks []*runner
}

// runner is one sink's delivery state.
type runner struct {
	Sink
	wake      chan struct{}
	cursor    atomic.Uint64
	loaded    bool
	delivered atomic.Uint64
	failures  atomic.Uint64
}

// New returns a set of sinks over store. Names must be unique and not empty.
func New(store Store, opts Options) (*Set, error) {
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
	s := &Set{store: store, opts: opts, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.head.Store(opts.Head)
	seen := map[string]bool{}
	for _, k := range opts.Sinks {
		if k.Name == "" || seen[k.Name] || k.Exporter == nil {
			return nil, fmt.Errorf("audit sink: name %q is empty, repeated or has no exporter", k.Name)
		}
		seen[k.Name] = true
		s.sinks = append(s.sinks, &runner{Sink: k, wake: make(chan struct{}, 1)})
	}
	return s, nil
}

// Committed advances the head and wakes every sink. It never blocks.
func (s *Set) Committed(recs []engine.AuditRecord, _ []engine.EntityState) {
	if len(recs) == 0 {
		return
	}
	s.SetHead(recs[len(recs)-1].Position)
	for _, r := range s.sinks {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// SetHead raises the head the backlog is measured against to pos.
func (s *Set) SetHead(pos uint64) {
	for {
		h := s.head.Load()
		if pos <= h || s.head.CompareAndSwap(h, pos) {
			return
		}
	}
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
			s.sleep(ctx, backoff/2+rand.N(backoff/2+1)) // jitter in [backoff/2, backoff]
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
// cursor, or one fails.
func (s *Set) catchUp(ctx context.Context, r *runner) error {
	for {
		n, err := s.deliver(ctx, r)
		if err != nil {
			if ctx.Err() == nil {
				r.failures.Add(1)
				s.log.Error("audit sink delivery failed; retrying from its cursor", "sink", r.Name,
					"cursor", r.cursor.Load(), "err", err)
			}
			return err
		}
		if n == 0 {
			return nil
		}
	}
}

// errBatchFull stops a scan once a batch is full.
var errBatchFull = errors.New("batch full")

// deliver exports the next batch after the cursor and then advances the
// cursor in the store. It returns how many records it delivered.
func (s *Set) deliver(ctx context.Context, r *runner) (int, error) {
	if !r.loaded {
		c, err := s.store.Cursor(ctx, r.Name)
		if err != nil {
			return 0, fmt.Errorf("read cursor: %w", err)
		}
		r.cursor.Store(c)
		s.SetHead(c)
		r.loaded = true
	}
	from := r.cursor.Load() + 1
	batch := make([]engine.AuditRecord, 0, min(s.opts.Batch, 64))
	err := s.store.ScanAudit(ctx, from, func(rec engine.AuditRecord) error {
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
		s.log.Error("audit sink missed records the store no longer holds (they are in the audit archive)", "sink", r.Name,
			"from", from, "to", batch[0].Position-1)
	}
	if err := r.Exporter.Export(ctx, batch); err != nil {
		return 0, err
	}
	last := batch[len(batch)-1].Position
	if err := s.store.SetCursor(ctx, r.Name, last); err != nil {
		return 0, fmt.Errorf("save cursor %d: %w", last, err)
	}
	r.cursor.Store(last)
	r.delivered.Add(uint64(len(batch)))
	s.SetHead(last)
	return len(batch), nil
}

// Flush delivers, on the calling goroutine, what every sink can up to the
// current head before ctx ends, each sink on its own. It returns
// ErrUndelivered naming the sinks left behind; their cursors keep the rest.
func (s *Set) Flush(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.sinks))
	head := s.head.Load()
	for i, r := range s.sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			backoff := s.opts.MinBackoff
			for {
				err := s.catchUp(ctx, r)
				if r.cursor.Load() >= head || ctx.Err() != nil || err == nil {
					break
				}
				s.sleep(ctx, backoff)
				backoff = min(2*backoff, s.opts.MaxBackoff)
			}
			if c := r.cursor.Load(); c < head {
				errs[i] = fmt.Errorf("%w: sink %s delivered up to %d of %d", ErrUndelivered, r.Name, c, head)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
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
	Name                string
	Cursor, Backlog     uint64
	Delivered, Failures uint64
}

// Status returns every sink's state, in configuration order.
func (s *Set) Status() []Status {
	head := s.head.Load()
	out := make([]Status, len(s.sinks))
	for i, r := range s.sinks {
		c := r.cursor.Load()
		out[i] = Status{Name: r.Name, Cursor: c, Backlog: head - min(c, head), Delivered: r.delivered.Load(), Failures: r.failures.Load()}
	}
	return out
}
