package forward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrFull is returned by an AdmitWithin gate whose wait ran out while the
// outbox stayed full.
var ErrFull = errors.New("forward: outbox full")

// gate is Admit's state: whether the outbox is full, since when, and a
// channel closed whenever entries leave it.
type gate struct {
	mu    sync.Mutex
	room  chan struct{}
	full  bool
	since time.Time
}

func (g *gate) init() { g.room = make(chan struct{}) }

// roomChan is closed the next time entries leave the outbox.
func (g *gate) roomChan() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.room
}

func (g *gate) signal() {
	g.mu.Lock()
	close(g.room)
	g.room = make(chan struct{})
	g.mu.Unlock()
}

// setFull records whether the outbox is full and reports whether that
// changed, and since when it was full.
func (g *gate) setFull(full bool) (changed bool, since time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	changed, since = g.full != full, g.since
	g.full = full
	if full && changed {
		g.since = time.Now()
	}
	return changed, since
}

func (g *gate) isFull() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.full
}

func (g *gate) state() (full bool, since time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.full, g.since
}

// removing notes n entries about to leave Member's outbox in the store.
// Until removedNow, a recount counts them as pending (refresh): the store
// may remove them before it counts, and the count must not then lose them
// a second time when removedNow takes them off. The store may as well
// remove them after it counts, and the count then holds them twice: so a
// recount that overlaps a removal has another count follow both.
func (d *Drainer) removing(n int) {
	d.countMu.Lock()
	d.leaving += int64(n)
	if d.counting > 0 {
		d.overlap = true
	}
	d.countMu.Unlock()
}

// removedNow ends removing(n): when the store removed the entries (ok), it
// takes them off the count and lets a waiting Admit look again.
func (d *Drainer) removedNow(n int, ok bool) {
	d.countMu.Lock()
	d.leaving -= int64(n)
	if ok {
		d.depth.Add(-int64(n))
	}
	again := d.settled()
	d.countMu.Unlock()
	if ok {
		d.gate.signal()
	}
	if again {
		d.askRecount()
	}
}

// settled reports, once no removal and no recount is under way, whether
// one overlapped the other, clearing it: then the depth may be high by the
// entries removed meanwhile, and is counted again. countMu is held.
func (d *Drainer) settled() bool {
	if !d.overlap || d.leaving != 0 || d.counting != 0 {
		return false
	}
	d.overlap = false
	return true
}

// refresh counts Member's pending entries in the store. Entries committed
// while it counts are added on top, and entries being removed are counted
// until their removal is taken off (removing), so the count errs on the
// high side; a count that overlapped a removal is followed by another
// once both are done (settled), which Run takes at once.
func (d *Drainer) refresh(ctx context.Context) error {
	before := d.added.Load()
	d.countMu.Lock()
	d.counting++
	if d.leaving > 0 {
		d.overlap = true
	}
	d.countMu.Unlock()
	n, err := d.opts.Store.OutboxDepth(ctx, d.opts.Member)
	d.countMu.Lock()
	d.counting--
	if err == nil {
		d.depth.Store(int64(n) + d.added.Load() - before + d.leaving)
	}
	again := d.settled()
	d.countMu.Unlock()
	if again {
		d.askRecount()
	}
	if err == nil {
		d.atBound()
	}
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("forward: cannot count the outbox's pending entries", "err", err)
		}
		return err
	}
	return nil
}

// atBound returns since when Member's outbox has held MaxEntries pending
// entries or more, as counted, or the zero time while it holds fewer. A
// full outbox holds back the next batch (Admit) whether or not one waits
// yet: after a restart on an outbox a downstream outage filled, or with
// outbox.max_entries lowered below its depth, readiness says so before a
// message arrives. The first time it finds the outbox at its bound it
// logs a warning.
func (d *Drainer) atBound() time.Time {
	depth, maxEntries := d.Depth()
	d.overMu.Lock()
	first := depth >= maxEntries && d.over.IsZero()
	switch {
	case depth < maxEntries:
		d.over = time.Time{}
	case first:
		d.over = time.Now()
	}
	since := d.over
	d.overMu.Unlock()
	if first && !d.gate.isFull() { // Admit, holding a batch back, says so itself
		d.log.Warn("forward: the outbox is at its bound; the next batch waits, uncommitted and unacknowledged upstream, until the downstream takes entries again",
			"depth", depth, "max_entries", maxEntries, "outputs", d.failingText())
	}
	return since
}

// Depth returns the number of pending entries in Member's outbox, as last
// counted and kept since, and the bound Admit holds it to.
func (d *Drainer) Depth() (depth, maxEntries int) {
	return int(max(d.depth.Load(), 0)), d.opts.MaxEntries
}

// Admit is the engine's backpressure gate (engine.Options.Admit): it
// returns at once while Member's outbox holds fewer than MaxEntries
// pending entries, counting those of the batches decided and not yet
// committed (inFlight; nil for none), and otherwise waits until the
// drainer has made room or ctx is done (then it returns ctx's error, and
// the batch is not decided). A consumer that cannot commit does not
// acknowledge upstream, and the broker stops sending once its receive
// maximum is in flight: nothing is lost. A batch admitted just below the
// bound may take the outbox past it by that batch's entries.
func (d *Drainer) Admit(ctx context.Context, inFlight func() int) error {
	if d.room(inFlight) && !d.gate.isFull() {
		return nil
	}
	for {
		roomCh := d.gate.roomChan()
		// The deltas say there is room: count again before admitting.
		if d.room(inFlight) && d.refresh(ctx) == nil && d.room(inFlight) {
			if changed, since := d.gate.setFull(false); changed {
				depth, _ := d.Depth()
				d.log.Info("forward: the outbox has room again; committing and acknowledging upstream again",
					"depth", depth, "max_entries", d.opts.MaxEntries, "full_for", time.Since(since).Round(time.Millisecond))
			}
			return nil
		}
		if changed, _ := d.gate.setFull(true); changed {
			depth, _ := d.Depth()
			d.log.Warn("forward: the outbox is full; the consumer stops committing, and so acknowledging upstream, until the downstream takes entries again",
				"depth", depth, "deciding", inFlightNow(inFlight), "max_entries", d.opts.MaxEntries, "outputs", d.failingText())
		}
		// Entries in flight become entries pending (or none, if their
		// commit fails) with no wake-up, and for an instant count as both:
		// look again soon while there are any.
		wait := d.opts.Poll
		if inFlightNow(inFlight) > 0 {
			wait = min(wait, inFlightRecheck)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-roomCh:
		case <-t.C:
			if wait == d.opts.Poll {
				_ = d.refresh(ctx) // whatever the deltas say
			}
		}
		t.Stop()
	}
}

// inFlightRecheck is how soon a full Admit looks again while batches are
// in flight: about a commit's time.
const inFlightRecheck = 5 * time.Millisecond

// room reports whether the outbox, with the entries of the batches in
// flight, is below MaxEntries.
func (d *Drainer) room(inFlight func() int) bool {
	return d.depth.Load()+int64(inFlightNow(inFlight)) < int64(d.opts.MaxEntries)
}

// inFlightNow is inFlight's count; 0 without one.
func inFlightNow(inFlight func() int) int {
	if inFlight == nil {
		return 0
	}
	return inFlight()
}

// AdmitWithin is Admit for a command that must end (ingest): a batch that
// waits longer than wait for room is refused with an error wrapping
// ErrFull, saying how full the outbox is and why.
func (d *Drainer) AdmitWithin(wait time.Duration) func(context.Context, func() int) error {
	return func(ctx context.Context, inFlight func() int) error {
		if d.room(inFlight) && !d.gate.isFull() {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		err := d.Admit(wctx, inFlight)
		if err != nil && ctx.Err() == nil {
			depth, maxEntries := d.Depth()
			return fmt.Errorf("%w: %d of %d entries pending for %s; %s", ErrFull, depth, maxEntries, wait, d.failingText())
		}
		return err
	}
}

// recountTimeout bounds Drain's last count of the outbox, after its ctx
// is done.
const recountTimeout = 5 * time.Second

// Drain waits until Member's outbox is empty or ctx is done, while Run
// delivers; it returns the entries still pending, and ErrUndelivered when
// some are.
func (d *Drainer) Drain(ctx context.Context) (pending int, err error) {
	for _, l := range d.snapshotLanes() {
		l.poke()
	}
	for {
		room := d.gate.roomChan()
		if d.refresh(ctx) == nil && d.depth.Load() <= 0 {
			return 0, nil
		}
		t := time.NewTimer(d.opts.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			// Count once more for the caller's report: a count taken while
			// entries were committed errs high (refresh), and by now the
			// caller commits nothing (ingest ended, run stopped consuming).
			rc, cancel := context.WithTimeout(context.WithoutCancel(ctx), recountTimeout)
			_ = d.refresh(rc)
			cancel()
			n, _ := d.Depth()
			return n, fmt.Errorf("%w: %d in the outbox; %s", ErrUndelivered, n, d.failingText())
		case <-room:
		case <-t.C:
		}
		t.Stop()
	}
}
