package forward

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxEntries = 100_000
	DefaultBatch      = 256
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	DefaultPoll       = 5 * time.Second
)

// Holder records an entry its downstream refused for good: an audit record
// (outcome forward_held) and the entry moved out of the pending outbox, in
// one commit. *engine.Engine is one.
type Holder interface {
	HoldForward(ctx context.Context, member string, entry engine.OutboxEntry, reason string) error
}

// Claimer is a shared store that says which members' outboxes this handle
// may drain now (engine.OutboxClaimer). The drainer claims at Run's start
// and then every Options.Poll or ClaimTTL/3, whichever is shorter; it
// drains only the members of the last answer, and releases a member's
// claim once it stops draining it (the member is missing from an answer,
// or its outbox is empty).
type Claimer = engine.OutboxClaimer

// Observer hears about deliveries, for metrics (*metrics.Metrics is one).
// Its methods are called from the drainer's goroutines and must not block.
type Observer interface {
	// Forwarded counts n entries of output with result "delivered",
	// "held" (refused for good) or "failed" (an attempt that failed; the
	// entries are sent again).
	Forwarded(output, result string, n int)
	// ForwardLatency is the time from an entry's decision to its
	// downstream acknowledgement.
	ForwardLatency(output string, d time.Duration)
	// ForwardRetried counts a retry of output after a failed attempt.
	ForwardRetried(output string)
}

// Results of Observer.Forwarded.
const (
	ResultDelivered = "delivered"
	ResultHeld      = "held"
	ResultFailed    = "failed"
)

// Options configure New.
type Options struct {
	// Store keeps the outbox. Required.
	Store engine.OutboxStore
	// Outputs deliver the entries, by kind (engine.OutputMQTT, …). An
	// entry of a kind without one waits in the store, counted as pending.
	Outputs map[string]Output
	// Member is the outbox this handle writes and drains: the shared
	// store's member id; "" on a single-owner store. Admit bounds it.
	Member string
	// Claimer, when set, adds the outboxes of dead members it claims.
	// Default nil: Member's outbox only.
	Claimer Claimer
	// MaxEntries bounds Member's pending entries: at that depth Admit
	// blocks. Default DefaultMaxEntries.
	MaxEntries int
	// Batch is how many entries are read, and passed to one Deliver, at a
	// time. Default DefaultBatch.
	Batch int
	// MinBackoff and MaxBackoff bound the jittered, doubling wait after a
	// failed attempt; MaxBackoffs overrides MaxBackoff per output kind.
	// Defaults DefaultMinBackoff, DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	MaxBackoffs            map[string]time.Duration
	// Poll is the fallback: every output reads the store this often even
	// when no commit woke it, the claims are renewed, the outbox's depth
	// is counted again and the held entries are read, so that an entry
	// another process retried is delivered (its member's outputs read
	// from the start). Default DefaultPoll.
	Poll time.Duration
	// Logger receives a line per failed attempt (they are backed off) and
	// per change of state. Default: discard.
	Logger *slog.Logger
	// Observer hears about deliveries. Default nil.
	Observer Observer
}

// Drainer delivers the outbox downstream: one goroutine per output kind
// and drained member, each reading its pending entries in ID order,
// delivering them in that order and marking them done only after the
// downstream acknowledged them. Everything it needs to resume is in the
// store: after a restart or a crash it delivers again what was not marked
// done, under the same keys.
//
// A Drainer is an engine.Observer, engine.OutboxObserver (a commit with
// outbox entries wakes the outputs it concerns) and
// engine.OutboxResolveObserver (a retried entry is read again),
// engine.OutboxHoldObserver (a lane waiting at an entry an operator held
// goes on at once), and
// provides Admit, the engine's backpressure gate. Its methods are safe for
// concurrent use.
type Drainer struct {
	opts Options
	log  *slog.Logger
	obs  Observer

	depth  atomic.Int64           // Member's pending entries: counted, kept by deltas
	newest atomic.Uint64          // the highest id of Member's entries committed since New
	added  atomic.Int64           // entries committed since New
	gate   gate                   // Admit's state
	outMu  map[string]*sync.Mutex // one Deliver per output at a time
	holder atomic.Pointer[Holder] // Run's

	// countMu orders a recount's store of depth (refresh) against the
	// entries taken off it (removedNow); leaving counts the entries whose
	// removal from the store is under way (removing), counting the
	// recounts under way, and overlap says that one of them ran while a
	// removal was under way, so that it may have counted its entries
	// twice: once both are done, another count is asked for (askRecount).
	countMu  sync.Mutex
	leaving  int64
	counting int
	overlap  bool

	overMu sync.Mutex
	over   time.Time // since when Member's outbox is at its bound (atBound); zero while below

	mu    sync.Mutex
	lanes map[laneID]*lane

	recount chan struct{} // asks Run for a count of the outbox before the next poll

	heldMu    sync.Mutex
	heldSince []heldRef            // entries the lanes or operators held since the last watchHeld
	holding   map[heldRef]struct{} // entries a lane is holding now (hold)
	heldSeen  map[heldRef]struct{} // the held entries at the last watchHeld; Run's
}

// New returns a drainer over opts.Store. It reads nothing until Run.
func New(opts Options) (*Drainer, error) {
	if opts.Store == nil {
		return nil, fmt.Errorf("%w: a drainer needs a store", ErrConfig)
	}
	if opts.MaxEntries < 0 || opts.Batch < 0 || opts.MinBackoff < 0 || opts.MaxBackoff < 0 || opts.Poll < 0 {
		return nil, fmt.Errorf("%w: negative bound", ErrConfig)
	}
	setDefault(&opts.MaxEntries, DefaultMaxEntries)
	setDefault(&opts.Batch, DefaultBatch)
	setDefault(&opts.MinBackoff, DefaultMinBackoff)
	setDefault(&opts.MaxBackoff, DefaultMaxBackoff)
	setDefault(&opts.Poll, DefaultPoll)
	d := &Drainer{opts: opts, log: opts.Logger, obs: opts.Observer, outMu: map[string]*sync.Mutex{}, lanes: map[laneID]*lane{},
		heldSeen: map[heldRef]struct{}{}, holding: map[heldRef]struct{}{}, recount: make(chan struct{}, 1)}
	if d.log == nil {
		d.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.obs == nil {
		d.obs = nopObserver{}
	}
	d.gate.init()
	for kind := range opts.Outputs {
		d.outMu[kind] = new(sync.Mutex)
		if opts.Claimer == nil { // else the claims say whose outboxes to drain
			d.lanes[laneID{opts.Member, kind}] = d.newLane(opts.Member, kind)
		}
	}
	if c := opts.Claimer; c != nil && c.ClaimTTL() > 0 {
		d.opts.Poll = min(d.opts.Poll, c.ClaimTTL()/3)
	}
	return d, nil
}

func setDefault[T int | time.Duration](p *T, v T) {
	if *p == 0 {
		*p = v
	}
}

// Committed implements engine.Observer: the outbox entries come through
// OutboxCommitted.
func (d *Drainer) Committed([]engine.AuditRecord, []engine.EntityState) {}

// OutboxCommitted implements engine.OutboxObserver: it counts the new
// entries of Member's outbox and wakes the outputs they go to. Entries
// whose ids are not above those committed before went back: the store
// lost the member's last commits (a failover to a standby that lacked
// them) and the member decided them again, at positions, and so outbox
// ids, at or below those its lanes had delivered up to; the lanes then
// read the outbox from its start, as after a requeue. It never blocks.
func (d *Drainer) OutboxCommitted(entries []engine.OutboxEntry) {
	if len(entries) == 0 {
		return
	}
	if entries[0].ID <= d.newest.Load() {
		d.rewind(d.opts.Member)
	}
	d.newest.Store(entries[len(entries)-1].ID)
	// added first: a recount (refresh) between the two, of a store that
	// did not hold these entries yet, then counts them through added, and
	// the count errs high, never low.
	d.added.Add(int64(len(entries)))
	d.depth.Add(int64(len(entries)))
	var kinds [3]string
	n := 0
	for _, e := range entries {
		if n < len(kinds) && !contains(kinds[:n], e.Output) {
			kinds[n] = e.Output
			n++
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range kinds[:n] {
		if l := d.lanes[laneID{d.opts.Member, k}]; l != nil {
			l.poke()
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Run delivers until ctx is done, holding the entries a downstream refuses
// for good through h (the engine), then returns once every output's
// goroutine has stopped. Entries in flight at that moment stay pending:
// the next Run sends them again. Run must not be called twice at once.
func (d *Drainer) Run(ctx context.Context, h Holder) {
	d.holder.Store(&h)
	_ = d.refresh(ctx)
	d.watchHeld(ctx)
	var wg sync.WaitGroup
	running := map[laneID]laneRun{}
	start := func(l *lane) {
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		running[l.id] = laneRun{cancel, done}
		wg.Go(func() {
			defer close(done)
			d.runLane(lctx, l)
		})
	}
	// release gives up a member's claim once its lanes have stopped (and
	// flushed their marks), so that the next claimant starts where they
	// ended; within a few seconds, as the store may not answer.
	release := func(ctx context.Context, member string, lanes []chan struct{}) {
		wg.Go(func() {
			for _, done := range lanes {
				<-done
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := d.opts.Claimer.ReleaseOutbox(rctx, member); err != nil && ctx.Err() == nil {
				d.log.Warn("forward: cannot release a claim; it expires by itself", "member", member, "err", err)
			}
		})
	}
	for _, l := range d.snapshotLanes() {
		start(l)
	}
	tick := time.NewTicker(d.opts.Poll)
	defer tick.Stop()
	var claimed time.Time // when the last ClaimOutboxes that answered began
	for {
		d.claim(ctx, running, start, release, &claimed)
	wait:
		for {
			select {
			case <-ctx.Done():
				for _, r := range running {
					r.cancel()
				}
				wg.Wait()
				return
			case <-d.recount:
				pctx, cancel := d.pollContext(ctx)
				_ = d.refresh(pctx)
				cancel()
			case <-tick.C:
				break wait
			}
		}
		// Bounded: a poll read that hangs would keep the next claim from
		// being made, and so the lanes from stopping before the claims
		// expire, while another process may take the outboxes over.
		pctx, cancel := d.pollContext(ctx)
		_ = d.refresh(pctx)
		d.watchHeld(pctx)
		cancel()
		for _, l := range d.snapshotLanes() {
			l.poke()
		}
	}
}

// pollContext bounds the poll's reads of the store to a sixth of the
// claims' lifetime when there are claims to renew, so that the next claim
// is made in time; without claims it is ctx.
func (d *Drainer) pollContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c := d.opts.Claimer; c != nil && c.ClaimTTL() > 0 {
		return context.WithTimeout(ctx, c.ClaimTTL()/6)
	}
	return context.WithCancel(ctx)
}

// claimWithin calls claim, given a third of the claims' lifetime ttl to
// answer (no bound when ttl is not positive): a store that does not answer
// fails the renewal in time for the lanes to stop before the claims expire.
func claimWithin(ctx context.Context, ttl time.Duration, claim func(context.Context) ([]string, error)) ([]string, error) {
	if ttl <= 0 {
		return claim(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, ttl/3)
	defer cancel()
	return claim(ctx)
}

// laneRun is a running lane's goroutine: cancel stops it, done is closed
// when it has returned.
type laneRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// claim starts an output goroutine for each kind of every member the
// Claimer hands over, and stops and releases those of members it no
// longer does and of other members whose outbox is empty. When the claims
// cannot be renewed, the lanes go on until a third of the claims'
// lifetime is left since the last renewal (*claimed, by this process's
// clock), then stop, before another process may claim their outboxes.
func (d *Drainer) claim(ctx context.Context, running map[laneID]laneRun, start func(*lane),
	release func(context.Context, string, []chan struct{}), claimed *time.Time) {
	c := d.opts.Claimer
	if c == nil {
		return
	}
	began := time.Now()
	members, err := claimWithin(ctx, c.ClaimTTL(), c.ClaimOutboxes)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if ttl := c.ClaimTTL(); ttl <= 0 || claimed.IsZero() || time.Since(*claimed) < ttl-ttl/3 || len(running) == 0 {
			d.log.Warn("forward: cannot claim the outboxes to drain; the last claims stand until they are about to expire", "err", err)
			return
		}
		d.log.Warn("forward: the outbox claims could not be renewed in time; stopped draining until they are", "err", err)
		d.mu.Lock()
		for id, r := range running {
			delete(d.lanes, id)
			r.cancel()
			delete(running, id)
		}
		d.mu.Unlock()
		return
	}
	*claimed = began
	want := map[string]bool{}
	for _, m := range members {
		want[m] = true
	}
	for m := range want {
		if m == d.opts.Member {
			continue
		}
		pctx, cancel := d.pollContext(ctx) // bounded, as the poll's reads
		n, err := d.opts.Store.OutboxDepth(pctx, m)
		cancel()
		if err == nil && n == 0 {
			want[m] = false // drained: released below
		}
	}
	d.mu.Lock()
	var added []*lane
	for m, ok := range want {
		for kind := range d.opts.Outputs {
			if id := (laneID{m, kind}); ok && d.lanes[id] == nil {
				d.lanes[id] = d.newLane(m, kind)
				added = append(added, d.lanes[id])
			}
		}
	}
	released := map[string][]chan struct{}{}
	for id := range d.lanes {
		if !want[id.member] {
			delete(d.lanes, id)
			stopped := released[id.member]
			if r, ok := running[id]; ok {
				r.cancel()
				delete(running, id)
				stopped = append(stopped, r.done)
			}
			released[id.member] = stopped
		}
	}
	d.mu.Unlock()
	for m, lanes := range released {
		release(ctx, m, lanes)
		d.log.Info("forward: stopped draining a member's outbox", "member", m, "own", m == d.opts.Member)
	}
	for _, l := range added {
		if l.own {
			d.log.Info("forward: draining this member's outbox", "member", l.id.member, "output", l.id.kind)
		} else {
			d.log.Info("forward: draining the outbox of a member whose lease expired", "member", l.id.member, "output", l.id.kind)
		}
		start(l)
	}
}

func (d *Drainer) snapshotLanes() []*lane {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*lane, 0, len(d.lanes))
	for _, l := range d.lanes {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id.less(out[j].id) })
	return out
}

// Close closes every output. Call it after Run has returned.
func (d *Drainer) Close() error {
	var first error
	for kind, o := range d.opts.Outputs {
		if err := o.Close(); err != nil && first == nil {
			first = fmt.Errorf("forward: close the %s output: %w", kind, err)
		}
	}
	return first
}

type nopObserver struct{}

func (nopObserver) Forwarded(string, string, int)        {}
func (nopObserver) ForwardLatency(string, time.Duration) {}
func (nopObserver) ForwardRetried(string)                {}
