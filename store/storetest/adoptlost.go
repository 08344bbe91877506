package storetest

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of a share marked lost (engine.ShareMembership.QuitShare): a
// member that lost its broker but still holds its lease keeps its share
// recorded, and its session is handed to a live member once the share
// has stayed lost for the wait the claimant asks for; joining again
// clears the loss, and a loss after it is another adoption.

// lostWait is the wait the cases ask for: long enough that a claim made
// at once after the loss hands nothing over, short for the suite.
const lostWait = 300 * time.Millisecond

func lostAdoptions(t *testing.T, h *handle, group string, lost time.Duration) []engine.Adoption {
	t.Helper()
	got, err := adopter(t, h).ClaimAdoptions(t.Context(), group, lost)
	if err != nil {
		t.Fatalf("%s claims the sessions of %q lost for %v: %v", h.member, group, lost, err)
	}
	return got
}

func quit(t *testing.T, h *handle, group string) {
	t.Helper()
	if err := share(t, h).QuitShare(t.Context(), group); err != nil {
		t.Fatalf("%s quits %q: %v", h.member, group, err)
	}
}

// lostClaimed waits until b claims a's session for its loss, and returns
// the adoption.
func lostClaimed(t *testing.T, b *handle) engine.Adoption {
	t.Helper()
	return lostClaimedVia(t, b, adopter(t, b), "a's lost session claimed")
}

// lostClaimedVia waits until b claims a's session of g for its loss
// through sa (the adopter of its one session or of a path's), and returns
// the adoption.
func lostClaimedVia(t *testing.T, b *handle, sa engine.ShareAdopter, what string) engine.Adoption {
	t.Helper()
	var ad engine.Adoption
	eventually(t, lostWait, what, func() bool {
		got, err := sa.ClaimAdoptions(t.Context(), "g", lostWait)
		if err != nil {
			t.Fatalf("%s claims the sessions of %q lost for %v: %v", b.member, "g", lostWait, err)
		}
		if len(got) > 1 || len(got) == 1 && got[0].Member != "a" {
			t.Fatalf("%s claimed %v, want a's session alone", b.member, got)
		}
		if len(got) == 1 {
			ad = got[0]
		}
		return len(got) == 1
	})
	return ad
}

func testAdoptLost(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	join(t, a, "g")
	join(t, b, "g")
	quit(t, a, "g")
	if got := lostAdoptions(t, b, "g", time.Hour); len(got) != 0 {
		t.Fatalf("b claimed %v with a lost for less than the wait", got)
	}
	if got := lostAdoptions(t, b, "g", 0); len(got) != 0 {
		t.Fatalf("b claimed %v asking for no lost member", got)
	}
	ad := lostClaimed(t, b)
	if want := (engine.Adoption{Member: "a", Group: "g", ClientID: "client-a", Holder: ad.Holder, Lost: ad.Lost}); !ad.Same(want) || ad.Lost.IsZero() {
		t.Fatalf("adoption %+v, want a's session with its loss time", ad)
	}
	if since := time.Since(ad.Lost); since < 0 || since > time.Minute {
		t.Fatalf("a's share marked lost at %v, %v ago: not the store's time of the loss", ad.Lost, since)
	}
	if !adopted(t, b, ad) {
		t.Fatal("b, holding the claim, could not record a out of the group")
	}
	if got := lostAdoptions(t, b, "g", lostWait); len(got) != 0 {
		t.Fatalf("b claimed %v once a was recorded out of the group", got)
	}
}

func testAdoptLostJoinedAgain(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	join(t, a, "g")
	quit(t, a, "g")
	first := lostClaimed(t, b)
	quit(t, a, "g") // lost still: the first loss's time stays
	if again := lostClaimed(t, b); !again.Same(first) {
		t.Fatalf("a lost twice without joining: claimed %+v, then %+v; want the first loss's time kept", first, again)
	}
	join(t, a, "g")
	if got := lostAdoptions(t, b, "g", lostWait); len(got) != 0 {
		t.Fatalf("b claimed %v with a joined again", got)
	}
	if adopted(t, b, first) {
		t.Fatal("b recorded a out of the group after it joined again")
	}
	quit(t, a, "g")
	second := lostClaimed(t, b)
	if !second.Lost.After(first.Lost) {
		t.Fatalf("a lost again after it joined: claimed with loss time %v, want after the first loss's %v", second.Lost, first.Lost)
	}
	if adopted(t, b, first) {
		t.Fatal("b recorded a out of the group by its first loss's adoption, a lost again since")
	}
	if !adopted(t, b, second) {
		t.Fatal("b could not record a out of the group by its second loss's adoption")
	}
}

func testAdoptLostLeaseTaken(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	join(t, a, "g")
	quit(t, a, "g")
	p.f.Kill(a.Store)
	_, ad := adoptedBy(t, "a", "g", b) // its lease gone
	if ad.Lost.IsZero() {
		t.Fatalf("a, lost then gone, claimed without its loss time: %+v", ad)
	}
	p.handle(t, "a") // back: taking its lease clears its share and the loss
	if got := lostAdoptions(t, b, "g", lostWait); len(got) != 0 {
		t.Fatalf("b claimed %v with a live again", got)
	}
	if adopted(t, b, ad) {
		t.Fatal("b recorded a out of the group after a took its lease again")
	}
}
