package storetest

import (
	"sync"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The cases of the MQTT share group's members (engine.ShareMembership): a
// member stopping leaves the group's subscription only while another live
// member holds it, so that the broker always has one to deal the group's
// messages to.

func share(t *testing.T, h *handle) engine.ShareMembership {
	t.Helper()
	if h.caps.Share == nil {
		t.Fatalf("%T declares no Capabilities.Share", h.Store)
	}
	return h.caps.Share
}

func join(t *testing.T, h *handle, group string) {
	t.Helper()
	if err := share(t, h).JoinShare(t.Context(), group, "client-"+h.member); err != nil {
		t.Fatalf("%s joins %q: %v", h.member, group, err)
	}
}

func leave(t *testing.T, h *handle, group string) bool {
	t.Helper()
	ok, err := share(t, h).LeaveShare(t.Context(), group)
	if err != nil {
		t.Fatalf("%s leaves %q: %v", h.member, group, err)
	}
	return ok
}

func testShareLeftWhileAnotherHolds(t *testing.T, p *place) {
	m1, m2, m3 := p.handle(t, "m1"), p.handle(t, "m2"), p.handle(t, "m3")
	join(t, m1, "g")
	if leave(t, m1, "g") {
		t.Fatal("the only member of the group was granted leave")
	}
	join(t, m3, "other")
	if leave(t, m1, "g") {
		t.Fatal("granted leave while the only other live member holds another group")
	}
	join(t, m2, "g")
	if leave(t, m1, "other") {
		t.Fatal("granted leave from a group the member never joined")
	}
	if !leave(t, m1, "g") {
		t.Fatal("refused leave while another live member holds the group")
	}
	if leave(t, m2, "g") {
		t.Fatal("the last member was granted leave after the other left")
	}
	if leave(t, m1, "g") {
		t.Fatal("a member that left was granted leave again")
	}
}

func testShareNotHeldByClosedMember(t *testing.T, p *place) {
	m1, m2 := p.handle(t, "m1"), p.handle(t, "m2")
	join(t, m1, "g")
	join(t, m2, "g")
	closeStore(t, m2)
	if leave(t, m1, "g") {
		t.Fatal("granted leave while the other member's handle is closed")
	}
	// Opened again, a member holds no group until it joins.
	m2 = p.handle(t, "m2")
	if leave(t, m1, "g") {
		t.Fatal("granted leave while the other member, opened again, has not joined")
	}
	join(t, m2, "g")
	if !leave(t, m1, "g") {
		t.Fatal("refused leave once the other member joined again")
	}
}

func testShareLastTwoLeavingAtOnce(t *testing.T, p *place) {
	m1, m2 := p.handle(t, "m1"), p.handle(t, "m2")
	for round := range 20 {
		join(t, m1, "g")
		join(t, m2, "g")
		var granted [2]bool
		var errs [2]error
		var wg sync.WaitGroup
		for i, h := range []*handle{m1, m2} {
			wg.Go(func() { granted[i], errs[i] = share(t, h).LeaveShare(t.Context(), "g") })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if granted[0] == granted[1] {
			t.Fatalf("round %d: the last two members leaving at once: granted %v, want exactly one", round, granted)
		}
	}
}

func testShareQuitUntilJoinedAgain(t *testing.T, p *place) {
	m1, m2 := p.handle(t, "m1"), p.handle(t, "m2")
	join(t, m1, "g")
	join(t, m2, "g")
	if err := share(t, m2).QuitShare(t.Context(), "other"); err != nil {
		t.Fatalf("m2 quits a group it does not hold: %v", err)
	}
	if err := share(t, m2).QuitShare(t.Context(), "g"); err != nil {
		t.Fatalf("m2 quits %q: %v", "g", err)
	}
	if leave(t, m1, "g") {
		t.Fatal("granted leave while the only other member quit the group")
	}
	if leave(t, m2, "g") {
		t.Fatal("a member that quit was granted leave")
	}
	join(t, m2, "g")
	if !leave(t, m1, "g") {
		t.Fatal("refused leave once the other member joined again")
	}
}
