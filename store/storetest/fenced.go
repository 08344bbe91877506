package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The claims of a fenced handle: one whose member's lease another process
// took while it stalled (a pause, a partition, a batch that held the
// lease's row). It is no longer the member, so it claims nothing, neither
// its member's outbox or chain nor those of departed members it held: the
// process that holds the lease now gets them, and two processes never
// drain one outbox or keep one chain side by side.

func testClaimFenced(t *testing.T, p *place) {
	claimsFenced(t, p, outboxClaims, func(t *testing.T, h *handle) { withEntries(t, member{s: h, h: &outboxHarness{s: h, member: h.member}}) })
}

func testChainClaimFenced(t *testing.T, p *place) {
	claimsFenced(t, p, chainClaims, func(t *testing.T, h *handle) { withChain(t, h, 2) })
}

// claimsFenced has a claim its own member's and departed d's k (each
// given something to hand over by fill), stalls a until a second handle
// of its member takes the lease, and checks that a claims nothing from
// then on, and that once a released what it held (as a drainer or chain
// keeper does for members missing from an answer) the new holder claims
// both.
func claimsFenced(t *testing.T, p *place, k claimKind, fill func(*testing.T, *handle)) {
	a, d := p.handle(t, "a"), p.handle(t, "d")
	fill(t, a)
	fill(t, d)
	k.claims(t, d)
	p.f.Kill(d.Store)
	k.claimOf(t, "d", nil, a)
	if got := k.claims(t, a); !slices.Equal(got, []string{"a", "d"}) {
		t.Fatalf("a claimed %v (%s claims), want [a d]", got, k.name)
	}
	p.f.Stall(a.Store)
	ttl := claimer(t, a).ClaimTTL()
	var a2 *handle
	eventually(t, ttl, "a second process of member a takes the lease once it expired", func() bool {
		s, err := p.open("a")
		if errors.Is(err, engine.ErrMemberHeld) {
			return false
		}
		if err != nil {
			t.Fatalf("open member a again: %v", err)
		}
		a2 = &handle{Store: s, p: p, caps: s.Capabilities(), member: "a"}
		return true
	})
	for range 3 {
		if got := k.claims(t, a); len(got) != 0 {
			t.Fatalf("a, whose lease another process took, claimed %v (%s claims); want none", got, k.name)
		}
	}
	k.release(t, a, "a")
	k.release(t, a, "d")
	if got := k.claims(t, a2); !slices.Equal(got, []string{"a", "d"}) {
		t.Fatalf("the process holding member a's lease claimed %v (%s claims) once the fenced one let go, want [a d]", got, k.name)
	}
	if got := k.claims(t, a); len(got) != 0 {
		t.Fatalf("the fenced a claimed %v (%s claims) while the new holder keeps them", got, k.name)
	}
}
