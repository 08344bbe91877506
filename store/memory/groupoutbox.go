package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// DefaultClaimTTL is how long a member handle's outbox claim holds without
// renewal, unless SetClaimTTL changes it.
const DefaultClaimTTL = 15 * time.Second

var _ engine.OutboxClaimer = (*Member)(nil)

// claimKind is what a claim hands over: a member's outbox, or its audit
// chain (engine.ChainKeeper).
type claimKind uint8

const (
	outboxClaim claimKind = iota
	chainClaim
)

// claimKey names one claim: what, of which member.
type claimKey struct {
	kind   claimKind
	member string
}

// claim is a handle's claim of one member's outbox or chain.
type claim struct {
	by      *Member
	expires time.Time
}

// SetClaimTTL sets how long an outbox or chain claim holds without renewal
// (tests of a takeover shorten it). d must be positive.
func (g *Group) SetClaimTTL(d time.Duration) {
	if d <= 0 {
		panic(fmt.Sprintf("memory: claim ttl %v is not positive", d))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.claimTTL = d
}

// Kill ends the handle as a killed process ends: it frees the member id at
// once (a group in memory has no lease to wait out), but leaves its outbox
// and chain claims to expire. Every later call on it returns
// engine.ErrClosed.
func (m *Member) Kill() {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	if m.member != "" {
		delete(m.g.members, m.member)
	}
}

// outboxOf returns member's outbox, creating it. Called with g.mu held.
func (g *Group) outboxOf(member string) *outbox {
	o := g.outboxes[member]
	if o == nil {
		o = newOutbox()
		g.outboxes[member] = o
	}
	return o
}

// writeOutbox applies b's resolutions, adds its entries to m's outbox
// and applies its holds. Called with g.mu held, after engine.CheckOutbox
// and checkResolved.
func (m *Member) writeOutbox(b *engine.Batch) {
	for _, r := range b.OutboxResolved {
		m.g.outboxes[r.Member].resolve(r)
	}
	if len(b.Outbox) > 0 {
		m.g.outboxOf(m.member).add(b.Outbox)
	}
	for _, h := range b.OutboxHeld {
		if o := m.g.outboxes[h.Member]; o != nil {
			o.hold(h.Member, h)
		}
	}
}

// Outbox returns up to limit of member's pending entries with ID > after,
// in ID order.
func (m *Member) Outbox(ctx context.Context, member string, after uint64, limit int) ([]engine.OutboxEntry, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	o := m.g.outboxes[member]
	if o == nil {
		return nil, nil
	}
	return o.list(after, limit), nil
}

// OutboxDone removes delivered entries of member's outbox; IDs no longer
// pending are ignored. A read-only handle writes nothing.
func (m *Member) OutboxDone(ctx context.Context, member string, ids []uint64) error {
	if err := m.lockWriter("outbox done"); err != nil {
		return err
	}
	defer m.g.mu.Unlock()
	if o := m.g.outboxes[member]; o != nil {
		o.done(ids)
	}
	return nil
}

// OutboxDepth counts member's pending entries.
func (m *Member) OutboxDepth(ctx context.Context, member string) (int, error) {
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.g.mu.Unlock()
	if o := m.g.outboxes[member]; o != nil {
		return len(o.pending), nil
	}
	return 0, nil
}

// OutboxHeld returns every member's held entries, by member then ID.
func (m *Member) OutboxHeld(ctx context.Context) ([]engine.HeldEntry, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	var out []engine.HeldEntry
	for _, member := range slices.Sorted(maps.Keys(m.g.outboxes)) {
		out = append(out, m.g.outboxes[member].heldEntries()...)
	}
	return out, nil
}

// ClaimOutboxes takes or renews this handle's outbox claims; see
// engine.OutboxClaimer. A member is live while a handle on it is open
// (not closed or killed).
func (m *Member) ClaimOutboxes(ctx context.Context) ([]string, error) {
	if err := m.lockWriter("claim outboxes"); err != nil {
		return nil, err
	}
	defer m.g.mu.Unlock()
	pending := func(member string) bool { return len(m.g.outboxes[member].pending) > 0 }
	return m.claimEach(outboxClaim, slices.Collect(maps.Keys(m.g.outboxes)), pending), nil
}

// claimEach takes or renews the claims of kind of m's own member and of
// each member of others that no live handle holds and that has something
// to hand over (has); it returns the members whose claims m holds now,
// sorted. Called with g.mu held.
func (m *Member) claimEach(kind claimKind, others []string, has func(member string) bool) []string {
	cands := []string{m.member}
	for _, member := range others {
		if member != m.member && !m.g.members[member] && has(member) {
			cands = append(cands, member)
		}
	}
	slices.Sort(cands)
	now := time.Now()
	var out []string
	for _, member := range cands {
		if m.take(claimKey{kind, member}, now) {
			out = append(out, member)
		}
	}
	return out
}

// take takes or renews claim k when it is free, expired or already m's.
// Called with g.mu held.
func (m *Member) take(k claimKey, now time.Time) bool {
	c, ok := m.g.claims[k]
	if ok && c.by != m && now.Before(c.expires) {
		return false
	}
	m.g.claims[k] = claim{by: m, expires: now.Add(m.g.claimTTL)}
	return true
}

// ReleaseOutbox gives up this handle's claim of member's outbox.
func (m *Member) ReleaseOutbox(ctx context.Context, member string) error {
	return m.release("release outbox", claimKey{outboxClaim, member})
}

// release gives up claim k when m holds it.
func (m *Member) release(op string, k claimKey) error {
	if err := m.lockWriter(op); err != nil {
		return err
	}
	defer m.g.mu.Unlock()
	if c, ok := m.g.claims[k]; ok && c.by == m {
		delete(m.g.claims, k)
	}
	return nil
}

// ClaimTTL is how long a claim holds without renewal.
func (m *Member) ClaimTTL() time.Duration {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	return m.g.claimTTL
}

// releaseClaims drops every claim m holds. Called with g.mu held.
func (m *Member) releaseClaims() {
	maps.DeleteFunc(m.g.claims, func(_ claimKey, c claim) bool { return c.by == m })
}
