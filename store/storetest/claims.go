package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of engine.OutboxClaimer: each member's outbox is drained by one
// process at a time, a dead member's by another once its lease expired.
// The helpers serve the chain claims of engine.ChainKeeper too
// (chainclaims.go), which follow the same rules.

// claimer is the handle's declared Claims.
func claimer(t *testing.T, s *handle) engine.OutboxClaimer {
	t.Helper()
	if s.caps.Claims == nil {
		t.Fatalf("%T declares no Capabilities.Claims", s.Store)
	}
	return s.caps.Claims
}

// claimKind is one kind of claim: of outboxes or of chains.
type claimKind struct {
	name string // what a claim is on: "outbox" or "chain"
	take func(ctx context.Context, s *handle) ([]string, error)
	give func(ctx context.Context, s *handle, member string) error
}

var (
	outboxClaims = claimKind{
		name: "outbox",
		take: func(ctx context.Context, s *handle) ([]string, error) { return s.caps.Claims.ClaimOutboxes(ctx) },
		give: func(ctx context.Context, s *handle, m string) error { return s.caps.Claims.ReleaseOutbox(ctx, m) },
	}
	chainClaims = claimKind{
		name: "chain",
		take: func(ctx context.Context, s *handle) ([]string, error) { return s.caps.Keeper.ClaimChains(ctx) },
		give: func(ctx context.Context, s *handle, m string) error { return s.caps.Keeper.ReleaseChain(ctx, m) },
	}
)

// claims takes or renews s's claims of kind k and returns them.
func (k claimKind) claims(t *testing.T, s *handle) []string {
	t.Helper()
	got, err := k.take(t.Context(), s)
	if err != nil {
		t.Fatalf("claim %ss of %s: %v", k.name, s.member, err)
	}
	if !slices.IsSorted(got) {
		t.Fatalf("%s claimed %ss %v, not sorted", s.member, k.name, got)
	}
	return got
}

// release gives up s's claim of kind k on member.
func (k claimKind) release(t *testing.T, s *handle, member string) {
	t.Helper()
	if err := k.give(t.Context(), s, member); err != nil {
		t.Fatalf("release the %s claim of %q: %v", k.name, member, err)
	}
}

func claims(t *testing.T, s *handle) []string {
	t.Helper()
	return outboxClaims.claims(t, s)
}

func release(t *testing.T, s *handle, member string) {
	t.Helper()
	outboxClaims.release(t, s, member)
}

// eventually polls ok until it holds, failing after what leases and claims
// of ttl could take many times over.
func eventually(t *testing.T, ttl time.Duration, what string, ok func() bool) {
	t.Helper()
	limit := 10*ttl + 5*time.Second
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(ttl / 20)
	}
}

func testClaimLive(t *testing.T, p *place) {
	a, b := openOutboxMember(t, p, "a"), openOutboxMember(t, p, "b")
	if got := claims(t, a.s); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a with an empty outbox claimed %v, want [a]", got)
	}
	withEntries(t, a)
	withEntries(t, b)
	for range 3 {
		if got := claims(t, a.s); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("a claimed %v, want [a]", got)
		}
		if got := claims(t, b.s); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("b claimed %v, want [b]: a is live", got)
		}
	}
	release(t, a.s, "a")
	release(t, a.s, "b") // not a's: left alone
	if got := claims(t, b.s); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b claimed %v after a released its claim, want [b]: a is live", got)
	}
	if got := claims(t, a.s); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a claimed %v after releasing, want [a]", got)
	}
}

// claimOf has one of hs claim target's outbox, and returns which; never
// two at once, never a member in never.
func claimOf(t *testing.T, target string, never []string, ms ...member) int {
	t.Helper()
	hs := make([]*handle, len(ms))
	for i := range ms {
		hs[i] = ms[i].s
	}
	return outboxClaims.claimOf(t, target, never, hs...)
}

// claimOf has one of hs claim target's k, and returns which; never two at
// once, never a member in never, and each always its own.
func (k claimKind) claimOf(t *testing.T, target string, never []string, hs ...*handle) int {
	t.Helper()
	ttl := claimer(t, hs[0]).ClaimTTL()
	winner := -1
	eventually(t, ttl, "the "+k.name+" of "+target+" claimed", func() bool {
		got := make([][]string, len(hs))
		var fns []func()
		for i := range hs {
			fns = append(fns, func() { got[i], _ = k.take(t.Context(), hs[i]) })
		}
		together(fns...)
		for i, g := range got {
			if g == nil || !slices.Contains(g, hs[i].member) {
				t.Fatalf("%s claimed %ss %v: not its own %s", hs[i].member, k.name, g, k.name)
			}
			for _, n := range never {
				if slices.Contains(g, n) {
					t.Fatalf("%s claimed %ss %v, with %s", hs[i].member, k.name, g, n)
				}
			}
			if slices.Contains(g, target) {
				if winner >= 0 {
					t.Fatalf("%s and %s both claimed the %s of %s", hs[winner].member, hs[i].member, k.name, target)
				}
				winner = i
			}
		}
		return winner >= 0
	})
	return winner
}

// stillHeld checks that loser does not get target's outbox while
// holder's claim, renewed at start, lives.
func stillHeld(t *testing.T, target string, holder, loser *handle) {
	t.Helper()
	outboxClaims.stillHeld(t, target, holder, loser)
}

// stillHeld checks that loser does not get target's k while holder's
// claim, renewed at start, lives.
func (k claimKind) stillHeld(t *testing.T, target string, holder, loser *handle) {
	t.Helper()
	start := time.Now()
	if got := k.claims(t, holder); !slices.Contains(got, target) {
		t.Fatalf("the claimant of %s's %s could not renew it: %v", target, k.name, got)
	}
	ttl := claimer(t, holder).ClaimTTL()
	for range 3 {
		got := k.claims(t, loser)
		if slices.Contains(got, target) && time.Since(start) < ttl {
			t.Fatalf("%s's %s claimed (%v) while another's claim of it lived", target, k.name, got)
		}
	}
}

func testClaimDead(t *testing.T, p *place) {
	a, d := openOutboxMember(t, p, "a"), openOutboxMember(t, p, "d")
	b, c := openOutboxMember(t, p, "b"), openOutboxMember(t, p, "c")
	withEntries(t, a)
	withEntries(t, b)
	ttl := claimer(t, a.s).ClaimTTL()
	claims(t, a.s)
	claims(t, d.s)
	// Never while a lives.
	for range 3 {
		for _, m := range []member{b, c} {
			if got := claims(t, m.s); !slices.Equal(got, []string{m.h.member}) {
				t.Fatalf("%s claimed %v while a and d live", m.h.member, got)
			}
		}
	}
	p.f.Kill(d.s.Store) // its outbox is empty: nobody claims it
	time.Sleep(ttl / 2)
	p.f.Kill(a.s.Store) // after d: d's lease is gone once a's is
	w := claimOf(t, "a", []string{"d"}, b, c)
	holder, loser := []member{b, c}[w], []member{b, c}[1-w]
	stillHeld(t, "a", holder.s, loser.s)
	// A claimant that closes releases its claims and its lease: the other
	// takes over a's outbox, and the closed one's when it holds entries.
	closeStore(t, holder.s)
	want := []string{"a", loser.h.member}
	if holder.h.member == "b" {
		want = []string{"a", "b", "c"}
	}
	if got := claims(t, loser.s); !slices.Equal(got, want) {
		t.Fatalf("%s claimed %v after %s closed, want %v", loser.h.member, got, holder.h.member, want)
	}
}

// takenOver kills a member with pending entries and waits for b to claim
// its outbox.
func takenOver(t *testing.T, p *place, a, b member) {
	t.Helper()
	withEntries(t, a)
	claims(t, a.s)
	p.f.Kill(a.s.Store)
	claimOf(t, "a", nil, b)
}

func testClaimRestart(t *testing.T, p *place) {
	a, b := openOutboxMember(t, p, "a"), openOutboxMember(t, p, "b")
	takenOver(t, p, a, b)
	start := time.Now()
	if got := claims(t, b.s); !slices.Contains(got, "a") {
		t.Fatalf("b could not renew its claim of a's outbox: %v", got)
	}
	a2 := openOutboxMember(t, p, "a") // not refused for b's claim
	ttl := claimer(t, b.s).ClaimTTL()
	if got := claims(t, a2.s); len(got) != 0 && time.Since(start) < ttl {
		t.Fatalf("restarted a claimed %v while b's claim of its outbox lived", got)
	}
	// a lives again: b's claim of its outbox is no longer renewed or
	// returned, and once b releases it, a drains its own.
	if got := claims(t, b.s); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b claimed %v with a live again, want [b]", got)
	}
	release(t, b.s, "a")
	if got := claims(t, a2.s); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("restarted a claimed %v after b released its outbox, want [a]", got)
	}
	if es := pending(t, a2.s.caps.Outbox, "a"); len(es) != 2 {
		t.Fatalf("a's outbox after the restart holds %d entries, want 2", len(es))
	}
}

func testClaimExpires(t *testing.T, p *place) {
	a, b := openOutboxMember(t, p, "a"), openOutboxMember(t, p, "b")
	takenOver(t, p, a, b)
	a2 := openOutboxMember(t, p, "a")
	ttl := claimer(t, a2.s).ClaimTTL()
	// b keeps running but stops draining a's outbox without releasing it.
	eventually(t, ttl, "restarted a claims its outbox once b's claim expired", func() bool {
		return slices.Equal(claims(t, a2.s), []string{"a"})
	})
	if got := claims(t, b.s); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b claimed %v after a took its outbox back", got)
	}
}

func testClaimRace(t *testing.T, p *place) {
	a, b, c := openOutboxMember(t, p, "a"), openOutboxMember(t, p, "b"), openOutboxMember(t, p, "c")
	takenOver(t, p, a, b)
	release(t, b.s, "a")
	for range 50 {
		w := claimOf(t, "a", nil, b, c)
		release(t, []member{b, c}[w].s, "a")
	}
}
