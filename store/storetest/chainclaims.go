package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of engine.ChainKeeper's claims: each member's chain is trimmed
// and streamed by one process at a time, a dead member's by another once
// its lease expired, as the outboxes are (claims.go). A claim holds for
// the store's OutboxClaimer.ClaimTTL.

// withChain commits n records to s's member's chain.
func withChain(t *testing.T, s *handle, n int) []engine.AuditRecord {
	t.Helper()
	c := s.chain()
	head, err := s.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c.head = head
	recs := c.records(t, n)
	commit(t, s, &engine.Batch{Audit: recs})
	return recs
}

func testChainClaimLive(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	if got := chainClaims.claims(t, a); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a without a chain claimed chains %v, want [a]", got)
	}
	withChain(t, a, 2)
	withChain(t, b, 3)
	for range 3 {
		if got := chainClaims.claims(t, a); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("a claimed chains %v, want [a]", got)
		}
		if got := chainClaims.claims(t, b); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("b claimed chains %v, want [b]: a is live", got)
		}
	}
	chainClaims.release(t, a, "a")
	chainClaims.release(t, a, "b") // not a's: left alone
	if got := chainClaims.claims(t, b); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b claimed chains %v after a released its claim, want [b]: a is live", got)
	}
	if got := chainClaims.claims(t, a); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a claimed chains %v after releasing, want [a]", got)
	}
	// Close gives up the lease and the claim at once.
	closeStore(t, a)
	if got := chainClaims.claims(t, b); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("b claimed chains %v after a closed, want [a b]", got)
	}
}

func testChainClaimDead(t *testing.T, p *place) {
	a, d := p.handle(t, "a"), p.handle(t, "d")
	b, c := p.handle(t, "b"), p.handle(t, "c")
	recs := withChain(t, a, 3)
	trimChain(t, a, "a", 4, baseOf(recs[2])) // a's chain is its base alone
	withChain(t, b, 1)
	ttl := claimer(t, a).ClaimTTL()
	chainClaims.claims(t, a)
	chainClaims.claims(t, d)
	for range 3 { // never while a lives
		for _, s := range []*handle{b, c} {
			if got := chainClaims.claims(t, s); !slices.Equal(got, []string{s.member}) {
				t.Fatalf("%s claimed chains %v while a and d live", s.member, got)
			}
		}
	}
	p.f.Kill(d.Store) // it has no chain: nobody claims it
	time.Sleep(ttl / 2)
	p.f.Kill(a.Store) // after d: d's lease is gone once a's is
	w := chainClaims.claimOf(t, "a", []string{"d"}, b, c)
	holder, loser := []*handle{b, c}[w], []*handle{b, c}[1-w]
	outboxClaims.release(t, holder, "a") // another kind of claim: the chain's stays
	chainClaims.stillHeld(t, "a", holder, loser)
	start := time.Now()
	chainClaims.claims(t, holder)
	chainClaims.release(t, loser, "a") // not the loser's: left alone
	if got := chainClaims.claims(t, loser); slices.Contains(got, "a") && time.Since(start) < ttl {
		t.Fatalf("%s claimed a's chain (%v) after releasing a claim it did not hold", loser.member, got)
	}
	// A claimant that closes releases its claims and its lease: the other
	// takes over a's chain, and the closed one's when it has one.
	closeStore(t, holder)
	want := []string{"a", loser.member}
	if holder.member == "b" {
		want = []string{"a", "b", "c"}
	}
	if got := chainClaims.claims(t, loser); !slices.Equal(got, want) {
		t.Fatalf("%s claimed chains %v after %s closed, want %v", loser.member, got, holder.member, want)
	}
}

// chainTakenOver kills a, whose chain has records, and waits for b to
// claim its chain.
func chainTakenOver(t *testing.T, p *place, a, b *handle) {
	t.Helper()
	withChain(t, a, 2)
	chainClaims.claims(t, a)
	p.f.Kill(a.Store)
	chainClaims.claimOf(t, "a", nil, b)
}

func testChainClaimRestart(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	chainTakenOver(t, p, a, b)
	start := time.Now()
	if got := chainClaims.claims(t, b); !slices.Contains(got, "a") {
		t.Fatalf("b could not renew its claim of a's chain: %v", got)
	}
	a2 := p.handle(t, "a") // not refused for b's claim
	ttl := claimer(t, b).ClaimTTL()
	if got := chainClaims.claims(t, a2); len(got) != 0 && time.Since(start) < ttl {
		t.Fatalf("restarted a claimed chains %v while b's claim of its chain lived", got)
	}
	// a lives again: b's claim of its chain is no longer renewed or
	// returned, and once b releases it, a keeps its own chain.
	if got := chainClaims.claims(t, b); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b claimed chains %v with a live again, want [b]", got)
	}
	chainClaims.release(t, b, "a")
	if got := chainClaims.claims(t, a2); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("restarted a claimed chains %v after b released its chain, want [a]", got)
	}
}

func testChainClaimExpires(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	chainTakenOver(t, p, a, b)
	a2 := p.handle(t, "a")
	ttl := claimer(t, a2).ClaimTTL()
	// b keeps running but stops keeping a's chain without releasing it.
	eventually(t, ttl, "restarted a claims its chain once b's claim expired", func() bool {
		return slices.Equal(chainClaims.claims(t, a2), []string{"a"})
	})
	if got := chainClaims.claims(t, b); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b claimed chains %v after a took its chain back", got)
	}
}

func testChainClaimRace(t *testing.T, p *place) {
	a, b, c := p.handle(t, "a"), p.handle(t, "b"), p.handle(t, "c")
	chainTakenOver(t, p, a, b)
	chainClaims.release(t, b, "a")
	for range 30 {
		w := chainClaims.claimOf(t, "a", nil, b, c)
		chainClaims.release(t, []*handle{b, c}[w], "a")
	}
}
