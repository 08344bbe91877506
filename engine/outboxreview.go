package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The audit outcomes of an operator's resolution of a held outbox entry.
const (
	// OutcomeForwardRetried: the entry is back in the pending outbox, to
	// be delivered again.
	OutcomeForwardRetried = "forward_retried"
	// OutcomeForwardDropped: the entry is removed for good; it is never
	// delivered.
	OutcomeForwardDropped = "forward_dropped"
)

// OutboxDepth is the number of pending entries of one member's outbox
// ("" on a single-owner store), and the oldest of them: the one an output
// that stopped delivering may be stuck at.
type OutboxDepth struct {
	Member  string         `json:"member"`
	Pending int            `json:"pending"`
	Oldest  *PendingOldest `json:"oldest,omitempty"` // nil when none is pending
}

// PendingOldest is the oldest pending entry of an outbox.
type PendingOldest struct {
	ID     uint64    `json:"id"`
	Output string    `json:"output"`
	Target string    `json:"target"` // redacted (RedactTarget)
	Time   time.Time `json:"time"`   // when it was decided
}

// OutboxReport is what an operator looks at: the held entries of every
// member, by member then ID, and each member's pending entries.
type OutboxReport struct {
	Held    []HeldEntry
	Pending []OutboxDepth
}

// ReadOutbox reads the outbox of s, which must keep one: on a shared store
// (one that scans chains) the pending entries of each member with an audit
// chain, by member id, else the one outbox's.
func ReadOutbox(ctx context.Context, s Store) (OutboxReport, error) {
	caps := s.Capabilities()
	ob := caps.Outbox
	if ob == nil {
		return OutboxReport{}, fmt.Errorf("%w: store %T keeps no outbox", ErrConfig, s)
	}
	var rep OutboxReport
	var err error
	if rep.Held, err = ob.OutboxHeld(ctx); err != nil {
		return OutboxReport{}, err
	}
	members := []string{""}
	if cs := caps.Chains; cs != nil {
		chains, err := cs.Chains(ctx)
		if err != nil {
			return OutboxReport{}, err
		}
		members = members[:0]
		for _, c := range chains {
			members = append(members, c.Member)
		}
	}
	for _, m := range members {
		n, err := ob.OutboxDepth(ctx, m)
		if err != nil {
			return OutboxReport{}, err
		}
		d := OutboxDepth{Member: m, Pending: n}
		if n > 0 {
			first, err := ob.Outbox(ctx, m, 0, 1)
			if err != nil {
				return OutboxReport{}, err
			}
			if len(first) == 1 {
				e := first[0]
				d.Oldest = &PendingOldest{ID: e.ID, Output: e.Output, Target: RedactTarget(e.Output, e.Target), Time: e.Time.UTC()}
			}
		}
		rep.Pending = append(rep.Pending, d)
	}
	return rep, nil
}

// ForwardResolution is what RetryForward or DropForward did: the entry as
// it was held, and the audit record committed (in this engine's chain).
type ForwardResolution struct {
	Entry  HeldEntry
	Record AuditRecord
}

// OutboxReport is ReadOutbox of the engine's store.
func (e *Engine) OutboxReport(ctx context.Context) (OutboxReport, error) {
	return ReadOutbox(ctx, e.store)
}

// RetryForward puts a held entry of member's outbox back into the pending
// outbox, with its ID and bytes unchanged, for the drainer to deliver
// again (once the downstream was fixed), in one commit with an audit
// record: outcome forward_retried, ref the entry, operator and reason
// (which may be empty) as given.
//
// member is "" on a single-owner store; on a shared store "" stands for
// the one member whose held entries include id, and ErrAmbiguous is
// returned when several do. An entry that is not held (never was, or
// another resolution came first, in this process or another) is
// ErrNotFound, with nothing written: of two concurrent resolutions of one
// entry exactly one succeeds.
func (e *Engine) RetryForward(ctx context.Context, member string, id uint64, reason, operator string) (ForwardResolution, error) {
	return e.resolveForward(ctx, OutboxResolve{Member: member, ID: id, Requeue: true}, reason, operator)
}

// DropForward removes a held entry of member's outbox for good, in one
// commit with an audit record: outcome forward_dropped, ref the entry,
// operator and reason (required). member and the errors are as for
// RetryForward.
func (e *Engine) DropForward(ctx context.Context, member string, id uint64, reason, operator string) (ForwardResolution, error) {
	if strings.TrimSpace(reason) == "" {
		return ForwardResolution{}, fmt.Errorf("%w: dropping an outbox entry needs a reason", ErrConfig)
	}
	return e.resolveForward(ctx, OutboxResolve{Member: member, ID: id}, reason, operator)
}

func (e *Engine) resolveForward(ctx context.Context, res OutboxResolve, reason, operator string) (ForwardResolution, error) {
	ob := e.caps.Outbox
	if ob == nil {
		return ForwardResolution{}, fmt.Errorf("%w: store %T keeps no outbox", ErrConfig, e.store)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ready(ctx); err != nil {
		return ForwardResolution{}, err
	}
	h, err := e.heldForward(ctx, ob, res.Member, res.ID)
	if err != nil {
		return ForwardResolution{}, err
	}
	res.Member = h.Member
	// On a single-owner store act lets the lock go while the commit runs:
	// a second resolution meanwhile still finds the entry held in the
	// store, and is refused here rather than by a failed commit.
	busy := OutboxResolve{Member: h.Member, ID: h.ID}
	if e.resolving[busy] {
		return ForwardResolution{}, fmt.Errorf("%w: held outbox entry %d%s is being resolved by another request", ErrNotFound, h.ID, ofMember(h.Member))
	}
	if e.resolving == nil {
		e.resolving = map[OutboxResolve]bool{}
	}
	e.resolving[busy] = true
	defer delete(e.resolving, busy)
	outcome := OutcomeForwardDropped
	if res.Requeue {
		outcome = OutcomeForwardRetried
	}
	if id, group := e.win.member(); group && h.Member != id {
		reason = strings.TrimSuffix("outbox of member "+h.Member+": "+reason, ": ")
	}
	var r AuditRecord
	fill := func(now time.Time) {
		r = AuditRecord{Time: now.UTC(), Route: h.Route, Topic: h.Topic, Source: h.Source, Epoch: h.Epoch,
			Key: h.Key, Outcome: outcome, Reason: reason, Ref: h.ID, Operator: operator}
		if h.Sequence >= 0 {
			s := h.Sequence
			r.Sequence = &s
		}
		e.appendAudit(&r)
		e.pending.batch.OutboxResolved = append(e.pending.batch.OutboxResolved, res)
	}
	if err := e.act(ctx, nil, fill); err != nil {
		return ForwardResolution{}, err
	}
	return ForwardResolution{Entry: h, Record: r}, nil
}

// heldForward finds held entry id of member's outbox; on a shared store
// member "" matches every member. Called with e.mu held.
func (e *Engine) heldForward(ctx context.Context, ob OutboxStore, member string, id uint64) (HeldEntry, error) {
	hs, err := ob.OutboxHeld(ctx)
	if err != nil {
		return HeldEntry{}, err
	}
	_, group := e.win.member()
	var found []HeldEntry
	for _, h := range hs {
		if h.ID == id && (h.Member == member || (member == "" && group)) {
			found = append(found, h)
		}
	}
	switch len(found) {
	case 0:
		return HeldEntry{}, fmt.Errorf("%w: no held outbox entry %d%s", ErrNotFound, id, ofMember(member))
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, h := range found {
		names[i] = fmt.Sprintf("%q", h.Member)
	}
	return HeldEntry{}, fmt.Errorf("%w: entry %d is held in the outboxes of members %s: name one", ErrAmbiguous, id, strings.Join(names, ", "))
}

func ofMember(m string) string {
	if m == "" {
		return ""
	}
	return fmt.Sprintf(" of member %q", m)
}

// HoldPending sets aside a pending entry of member's outbox that its
// downstream keeps refusing with an error that passes for a retryable one
// (a webhook's 503 to that entry alone, a JetStream PubAck error that
// repeats), so that the entries behind it go on: in one commit, an audit
// record (outcome forward_held, ref the entry, the operator, and the
// reason, required) and the entry moved to the held ones, where
// RetryForward and DropForward resolve it. A copy of it may still reach the
// downstream if an attempt under way succeeds; a retry sends it again
// under its key.
//
// member is "" on a single-owner store; on a shared store "" stands for
// this engine's own member. An entry that is not pending in member's
// outbox (delivered, held already, never was, or member keeps no outbox
// here) is ErrNotFound, with nothing written; so is one the drainer
// delivers between this read of it and the hold's commit ("was delivered
// meanwhile": the store checks it is still pending).
func (e *Engine) HoldPending(ctx context.Context, member string, id uint64, reason, operator string) (ForwardResolution, error) {
	ob := e.caps.Outbox
	if ob == nil {
		return ForwardResolution{}, fmt.Errorf("%w: store %T keeps no outbox", ErrConfig, e.store)
	}
	if strings.TrimSpace(reason) == "" {
		return ForwardResolution{}, fmt.Errorf("%w: holding a pending outbox entry needs a reason", ErrConfig)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ready(ctx); err != nil {
		return ForwardResolution{}, err
	}
	own, group := e.win.member()
	if group && member == "" {
		member = own
	}
	var entry OutboxEntry
	// A single-owner store keeps the outbox of member "" alone: another
	// member holds no entry there, as RetryForward and DropForward find.
	if id > 0 && (group || member == "") {
		page, err := ob.Outbox(ctx, member, id-1, 1)
		if err != nil {
			return ForwardResolution{}, err
		}
		if len(page) == 1 && page[0].ID == id {
			entry = page[0]
		}
	}
	if entry.ID == 0 {
		return ForwardResolution{}, fmt.Errorf("%w: no pending outbox entry %d%s", ErrNotFound, id, ofMember(member))
	}
	why := fmt.Sprintf("%s %s: held by an operator while pending: %s", entry.Output, RedactTarget(entry.Output, entry.Target), reason)
	var r AuditRecord
	hold := func(now time.Time) {
		r = AuditRecord{Time: now.UTC(), Route: entry.Route, Topic: entry.Topic, Source: entry.Source,
			Epoch: entry.Epoch, Key: entry.Key, Outcome: OutcomeForwardHeld, Reason: why, Ref: entry.ID, Operator: operator}
		if entry.Sequence >= 0 {
			s := entry.Sequence
			r.Sequence = &s
		}
		e.appendAudit(&r)
		e.pending.batch.OutboxHeld = append(e.pending.batch.OutboxHeld, OutboxHold{Member: member, ID: entry.ID, Reason: why, Output: entry.Output, Pending: true})
	}
	// The store refuses a hold of an entry delivered meanwhile: no
	// consumer's batch may be decided on top of it before it knows.
	if err := e.win.actAlone(ctx, hold); errors.Is(err, ErrNotFound) {
		return ForwardResolution{}, fmt.Errorf("%w: outbox entry %d%s was delivered meanwhile: not held, nothing written", ErrNotFound, id, ofMember(member))
	} else if err != nil {
		return ForwardResolution{}, err
	}
	return ForwardResolution{Entry: HeldEntry{OutboxEntry: entry, Member: member, Reason: why}, Record: r}, nil
}
