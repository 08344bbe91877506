package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/httpretry"
)

// laneID names one output goroutine: an output kind of one member's
// outbox.
type laneID struct{ member, kind string }

func (a laneID) less(b laneID) bool {
	if a.member != b.member {
		return a.member < b.member
	}
	return a.kind < b.kind
}

// lane delivers the entries of one kind of one member's outbox.
type lane struct {
	id    laneID
	out   Output
	outMu *sync.Mutex
	own   bool // the outbox Admit bounds
	wake  chan struct{}
	after uint64 // entries up to here are delivered, held or of another kind
	// rewind has the next catch-up read from the start of the outbox: an
	// entry below after is pending again (an operator retried it, or its
	// mark failed).
	rewind atomic.Bool
	mark   *marker // while runLane runs
	// stuck is the entry the last failed attempt stopped at (nil when the
	// attempt failed before any entry, reading the store); runLane's.
	stuck *engine.OutboxEntry
	// skip cuts a backoff short: an entry of the lane's member was held
	// by an operator while pending, perhaps the one the lane waits at.
	skip chan struct{}
	// moved says that the last catch-up delivered or held an entry;
	// runLane's.
	moved bool

	mu sync.Mutex
	st OutputStatus
	// entryFailed says that an attempt failed at an entry since the lane
	// last delivered, not before any (reading the store): for an output no
	// route forwards to and the file does not name, only that is the
	// output's to report.
	entryFailed bool
}

func (d *Drainer) newLane(member, kind string) *lane {
	return &lane{id: laneID{member, kind}, out: d.opts.Outputs[kind], outMu: d.outMu[kind],
		own: member == d.opts.Member, wake: make(chan struct{}, 1), skip: make(chan struct{}, 1),
		st: OutputStatus{Output: kind, Member: member}}
}

// poke wakes the lane without blocking.
func (l *lane) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (d *Drainer) maxBackoff(kind string) time.Duration {
	if b, ok := d.opts.MaxBackoffs[kind]; ok && b > 0 {
		return b
	}
	return d.opts.MaxBackoff
}

// runLane delivers until ctx is done: after each failed attempt it waits a
// jittered, doubling backoff, whatever commits meanwhile; otherwise it
// waits for a commit that concerns it or for the poll. An attempt that
// delivered or held entries before it failed starts the backoff again from
// the shortest: the downstream took them, and a broker that closes the
// connection after each copy it refuses (Mosquitto, after a PUBACK of an
// ACL's 0x87) would otherwise have the waits double from one refused copy
// to the next, up to the longest each, while every entry behind waits.
func (d *Drainer) runLane(ctx context.Context, l *lane) {
	l.mark = d.startMarker(ctx, l)
	defer l.mark.stop()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		select {
		case <-l.skip: // asked before this attempt, whose read of the outbox sees that hold
		default:
		}
		err := d.catchUp(ctx, l)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if l.moved {
				backoff = 0
			}
			backoff = min(max(2*backoff, d.opts.MinBackoff), d.maxBackoff(l.id.kind))
			wait := httpretry.Wait(err, backoff/2+rand.N(backoff/2+1)) // jitter in [backoff/2, backoff], or what the receiver asked for
			d.failed(l, err, wait)
			sleep(ctx, wait, l.skip)
			d.obs.ForwardRetried(l.id.kind)
			continue
		}
		if backoff > 0 {
			d.recovered(l)
			backoff = 0
		}
		select {
		case <-ctx.Done():
		case <-l.wake:
		}
	}
}

// sleep waits d, or until ctx is done or skip receives.
func sleep(ctx context.Context, d time.Duration, skip <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-skip:
	}
}

// catchUp delivers pages of pending entries after the lane's cursor until
// the store has none left, or an attempt fails. A failure leaves the
// cursor after the last entry done, so that the next attempt sends the
// rest again. A rewound lane reads from the start.
func (d *Drainer) catchUp(ctx context.Context, l *lane) error {
	l.stuck, l.moved = nil, false
	if err := l.mark.takeErr(); err != nil {
		return err
	}
	if l.rewind.Swap(false) {
		l.mark.wait() // what was delivered is marked first, not sent again
		l.after = 0
	}
	for {
		page, err := d.opts.Store.Outbox(ctx, l.id.member, l.after, d.opts.Batch)
		if err != nil {
			return fmt.Errorf("read the outbox: %w", err)
		}
		if len(page) == 0 {
			return nil
		}
		mine := make([]engine.OutboxEntry, 0, len(page))
		for _, e := range page {
			if e.Output == l.id.kind {
				mine = append(mine, e)
			}
		}
		if err := d.deliver(ctx, l, mine); err != nil {
			return err
		}
		if err := l.mark.takeErr(); err != nil {
			return err
		}
		l.after = page[len(page)-1].ID
	}
}

// deliver sends entries to the lane's output, marks the acknowledged ones
// done and holds those refused for good, until all are done or held or an
// attempt fails.
func (d *Drainer) deliver(ctx context.Context, l *lane, entries []engine.OutboxEntry) error {
	for len(entries) > 0 {
		counted := 0 // entries counted delivered as the output acknowledged them
		l.outMu.Lock()
		var n int
		var err error
		if p, ok := l.out.(progressive); ok {
			n, err = p.deliverEach(ctx, entries, func(i int) {
				if i < len(entries) && i >= counted {
					d.delivered(l, entries[counted:i+1])
					counted = i + 1
				}
			})
		} else {
			n, err = l.out.Deliver(ctx, entries)
		}
		l.outMu.Unlock()
		n = min(max(n, 0), len(entries))
		if counted < n {
			d.delivered(l, entries[counted:n])
		}
		if n > 0 {
			if derr := d.done(ctx, l, entries[:n]); derr != nil {
				return derr
			}
		}
		var ref *RefusedError
		switch {
		case err == nil && n == len(entries):
			return nil
		case errors.As(err, &ref) && ref.Index == n:
			if herr := d.hold(ctx, l, entries[n], ref.Reason); herr != nil {
				return herr
			}
			entries = entries[n+1:]
		case err == nil:
			return fmt.Errorf("%s output delivered %d of %d entries without an error", l.id.kind, n, len(entries))
		default:
			// The entry the attempt stopped at failed; those after it
			// were not tried (a webhook sends one at a time), or were
			// sent with it and wait the same retry.
			d.obs.Forwarded(l.id.kind, ResultFailed, 1)
			l.stuck = &entries[n]
			return err
		}
	}
	return nil
}

// delivered counts entries the downstream acknowledged (the metric, their
// latency, the lane's status): as each is acknowledged when the output
// tells it (progressive), else when Deliver returns. A copy that is sent
// again after its mark failed counts again.
func (d *Drainer) delivered(l *lane, entries []engine.OutboxEntry) {
	now := time.Now()
	for _, e := range entries {
		d.obs.ForwardLatency(l.id.kind, now.Sub(e.Time))
	}
	d.obs.Forwarded(l.id.kind, ResultDelivered, len(entries))
	l.mu.Lock()
	l.st.Delivered += uint64(len(entries))
	l.mu.Unlock()
}

// done hands delivered entries to the lane's marker, which marks them
// done in the store.
func (d *Drainer) done(ctx context.Context, l *lane, entries []engine.OutboxEntry) error {
	ids := make([]uint64, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	l.after = ids[len(ids)-1]
	l.moved = true
	return l.mark.add(ctx, ids)
}

// hold holds an entry its downstream refused for good.
func (d *Drainer) hold(ctx context.Context, l *lane, e engine.OutboxEntry, reason string) error {
	if l.own {
		d.removing(1)
	}
	ref := heldRef{l.id.member, e.ID}
	d.heldMu.Lock()
	d.holding[ref] = struct{}{} // not an operator's: OutboxHolds leaves it out
	d.heldMu.Unlock()
	err := (*d.holder.Load()).HoldForward(ctx, l.id.member, e, reason)
	d.heldMu.Lock()
	delete(d.holding, ref)
	d.heldMu.Unlock()
	if l.own {
		d.removedNow(1, err == nil)
	}
	if err != nil {
		return fmt.Errorf("hold entry %d refused by the downstream: %w", e.ID, err)
	}
	l.after = e.ID
	l.moved = true
	d.heldBy(l.id.member, e.ID)
	d.log.Warn("forward: the downstream refused an entry; it is held for an operator (audit outcome forward_held)",
		"output", l.id.kind, "target", engine.RedactTarget(e.Output, e.Target), "key", e.Key.String(), "reason", reason)
	d.obs.Forwarded(l.id.kind, ResultHeld, 1)
	l.mu.Lock()
	l.st.Held++
	l.mu.Unlock()
	return nil
}

// failed notes a failed attempt: logged, with the wait before the next
// and the entry it stopped at, and kept for Status.
func (d *Drainer) failed(l *lane, err error, wait time.Duration) {
	now := time.Now()
	l.mu.Lock()
	if !l.st.Failing {
		l.st.Failing, l.st.Since = true, now
	}
	l.st.Attempts++
	l.st.Failures++
	l.st.LastError = err.Error()
	l.entryFailed = l.entryFailed || l.stuck != nil
	switch {
	case l.stuck == nil:
	case l.st.Stuck.ID == l.stuck.ID:
		l.st.Stuck.Attempts++
	default:
		e := l.stuck
		l.st.Stuck = StuckEntry{ID: e.ID, Target: engine.RedactTarget(e.Output, e.Target), Key: e.Key.String(), Since: now, Attempts: 1}
	}
	attempts, since, stuck := l.st.Attempts, l.st.Since, l.st.Stuck
	l.mu.Unlock()
	args := []any{"output", l.id.kind, "member", l.id.member, "attempt", attempts, "failing_for", time.Since(since).Round(time.Millisecond),
		"retry_in", wait.Round(time.Millisecond), "err", err}
	if l.stuck != nil {
		args = append(args, "entry", stuck.ID, "target", stuck.Target, "entry_attempts", stuck.Attempts)
	}
	level := slog.LevelWarn
	if _, unset := l.out.(unconfigured); unset && l.stuck == nil {
		level = slog.LevelDebug // the store's failure, which the named outputs report
	}
	d.log.Log(context.Background(), level, "forward: delivery failed; the entries wait in the outbox and are sent again", args...)
}

func (d *Drainer) recovered(l *lane) {
	l.mu.Lock()
	attempts, since := l.st.Attempts, l.st.Since
	l.st.Failing, l.st.Attempts, l.st.LastError, l.st.Stuck = false, 0, "", StuckEntry{}
	l.entryFailed = false
	l.mu.Unlock()
	d.log.Info("forward: delivering again", "output", l.id.kind, "member", l.id.member,
		"failed_attempts", attempts, "down_for", time.Since(since).Round(time.Millisecond))
}
