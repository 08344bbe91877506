package forward

import (
	"context"

	"github.com/replayguard/replayguard/engine"
)

// An operator who retries a held entry (engine.Engine.RetryForward) puts
// it back into the pending outbox under its own ID, below where the lanes
// of its member have read up to. The lanes read from the start again once
// they learn of it: at once when the retry was committed by this
// process's engine (OutboxResolved), else at the next poll, which finds
// an entry it had seen held, or that this drainer held, no longer held
// (the CLI, or another member's API, resolved it).

// heldRef names a held entry.
type heldRef struct {
	member string
	id     uint64
}

// OutboxResolved implements engine.OutboxResolveObserver: a requeued entry
// counts as pending again and has the lanes of its member read from the
// start. It never blocks.
func (d *Drainer) OutboxResolved(rs []engine.OutboxResolve) {
	for _, r := range rs {
		if !r.Requeue {
			continue
		}
		if r.Member == d.opts.Member {
			d.depth.Add(1)
			d.added.Add(1)
		}
		d.rewind(r.Member)
	}
}

// rewind has the lanes of member's outbox read it from the start.
func (d *Drainer) rewind(member string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, l := range d.lanes {
		if id.member == member {
			l.rewind.Store(true)
			l.poke()
		}
	}
}

// OutboxHolds implements engine.OutboxHoldObserver: an entry an operator
// held while pending (engine.Engine.HoldPending, through this process's
// engine: the API, or the CLI through it) cuts short the backoff of the
// lanes of its member at once, so that a lane waiting to send it again
// goes on after it rather than at the end of its backoff or the next
// poll, and counts as held by its output, as an entry the downstream
// refused for good does. The entries the lanes hold themselves are left
// out. It never blocks.
func (d *Drainer) OutboxHolds(held []engine.OutboxHold) {
	d.heldMu.Lock()
	var members []string
	var counted []engine.OutboxHold
	for _, h := range held {
		r := heldRef{h.Member, h.ID}
		if _, ok := d.holding[r]; ok {
			continue
		}
		d.heldSince = append(d.heldSince, r) // seen: the next watchHeld skips nothing again
		counted = append(counted, h)
		if !contains(members, h.Member) {
			members = append(members, h.Member)
		}
	}
	d.heldMu.Unlock()
	for _, h := range counted {
		d.countHeld(h.Member, h.Output)
		if h.Pending && h.Member == d.opts.Member {
			d.askRecount() // it left Member's pending outbox in the engine's commit
		}
	}
	for _, m := range members {
		d.skipBackoff(m)
	}
}

// askRecount has Run count Member's pending entries again soon, rather
// than at the next poll: entries left the outbox in a commit not the
// drainer's own, whose removal it cannot order against a count running
// meanwhile (see removing). It never blocks.
func (d *Drainer) askRecount() {
	select {
	case d.recount <- struct{}{}:
	default: // one asked already: that count comes after this
	}
}

// countHeld counts an entry of member's outbox an operator held in the
// held count of its output's lane, when this drainer runs that lane.
func (d *Drainer) countHeld(member, output string) {
	d.mu.Lock()
	l := d.lanes[laneID{member, output}]
	d.mu.Unlock()
	if l == nil {
		return
	}
	d.obs.Forwarded(output, ResultHeld, 1)
	l.mu.Lock()
	l.st.Held++
	l.mu.Unlock()
}

// heldBy notes an entry a lane held, for the next watchHeld.
func (d *Drainer) heldBy(member string, id uint64) {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	d.heldSince = append(d.heldSince, heldRef{member, id})
}

// watchHeld reads the held entries and rewinds the lanes of every member
// one of whose entries, held at the last look or held by this drainer
// since, is held no more; and cuts short the backoff of the lanes of every
// member with an entry held since the last look by someone else (an
// operator's `outbox hold` of the entry a lane is stuck at), so that they
// go on after it. Called by Run's goroutine only.
func (d *Drainer) watchHeld(ctx context.Context) {
	d.heldMu.Lock()
	seen := d.heldSeen
	for _, r := range d.heldSince {
		seen[r] = struct{}{}
	}
	d.heldSince = nil
	d.heldMu.Unlock()
	hs, err := d.opts.Store.OutboxHeld(ctx)
	if err != nil {
		d.heldSeen = seen // looked at again next time
		if ctx.Err() == nil {
			d.log.Warn("forward: cannot read the held entries; a retry by another process is delivered once they can be read", "err", err)
		}
		return
	}
	now := make(map[heldRef]struct{}, len(hs))
	for _, h := range hs {
		now[heldRef{h.Member, h.ID}] = struct{}{}
	}
	gone, added := map[string]bool{}, map[string]bool{}
	for r := range seen {
		if _, ok := now[r]; !ok {
			gone[r.member] = true
		}
	}
	for r := range now {
		if _, ok := seen[r]; !ok {
			added[r.member] = true
		}
	}
	d.heldSeen = now
	for m := range gone {
		d.rewind(m)
	}
	for m := range added {
		d.skipBackoff(m)
	}
}

// skipBackoff cuts short the backoff of the lanes of member's outbox.
func (d *Drainer) skipBackoff(member string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, l := range d.lanes {
		if id.member == member {
			select {
			case l.skip <- struct{}{}:
			default:
			}
		}
	}
}
