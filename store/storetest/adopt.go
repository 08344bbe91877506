package storetest

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// The cases of the adoption of a gone member's MQTT session
// (engine.ShareAdopter): one live member at a time claims the session of
// a member gone while it held the share group's subscription, with the
// client id it recorded, and records it out of the group once adopted;
// a member that returns is neither claimed nor recorded out.

func adopter(t *testing.T, h *handle) engine.ShareAdopter {
	t.Helper()
	if h.caps.Adopt == nil {
		t.Fatalf("%T declares no Capabilities.Adopt", h.Store)
	}
	return h.caps.Adopt
}

func adoptions(t *testing.T, h *handle, group string) []engine.Adoption {
	t.Helper()
	got, err := adopter(t, h).ClaimAdoptions(t.Context(), group, 0)
	if err != nil {
		t.Fatalf("%s claims the sessions of %q: %v", h.member, group, err)
	}
	return got
}

func adopted(t *testing.T, h *handle, a engine.Adoption) bool {
	t.Helper()
	ok, err := adopter(t, h).ShareAdopted(t.Context(), a)
	if err != nil {
		t.Fatalf("%s records %s adopted: %v", h.member, a.Member, err)
	}
	return ok
}

// adoptedBy waits until one of hs claims member's session of group and
// returns which, with the adoption; never two at once.
func adoptedBy(t *testing.T, member, group string, hs ...*handle) (int, engine.Adoption) {
	t.Helper()
	ttl := claimer(t, hs[0]).ClaimTTL()
	winner, ad := -1, engine.Adoption{}
	eventually(t, ttl, "the session of "+member+" claimed", func() bool {
		for i, h := range hs {
			for _, a := range adoptions(t, h, group) {
				if a.Member != member {
					t.Fatalf("%s claimed the session of %s, want only %s's", h.member, a.Member, member)
				}
				if winner >= 0 && winner != i {
					t.Fatalf("%s and %s both claimed the session of %s", hs[winner].member, h.member, member)
				}
				winner, ad = i, a
			}
		}
		return winner >= 0
	})
	return winner, ad
}

func testAdoptGoneMemberOnce(t *testing.T, p *place) {
	a, b, c := p.handle(t, "a"), p.handle(t, "b"), p.handle(t, "c")
	join(t, a, "g")
	join(t, b, "g")
	for range 3 {
		for _, h := range []*handle{b, c} {
			if got := adoptions(t, h, "g"); len(got) != 0 {
				t.Fatalf("%s claimed %v while every member lives", h.member, got)
			}
		}
	}
	p.f.Kill(a.Store)
	w, ad := adoptedBy(t, "a", "g", b, c)
	want := engine.Adoption{Member: "a", Group: "g", ClientID: "client-a", Holder: ad.Holder}
	if !ad.Same(want) || ad.Holder == "" || ad.Brokers != nil || ad.Filters != nil {
		t.Fatalf("adoption %+v, want %+v with the holder of a's lease", ad, want)
	}
	winner, loser := []*handle{b, c}[w], []*handle{b, c}[1-w]
	if got := adoptions(t, winner, "other"); len(got) != 0 {
		t.Fatalf("%s claimed %v in a group a never joined", winner.member, got)
	}
	if adopted(t, loser, ad) {
		t.Fatalf("%s, without the claim, recorded a out of the group", loser.member)
	}
	if !adopted(t, winner, ad) {
		t.Fatalf("%s, holding the claim, could not record a out of the group", winner.member)
	}
	for _, h := range []*handle{b, c} {
		if got := adoptions(t, h, "g"); len(got) != 0 {
			t.Fatalf("%s claimed %v once a was recorded out of the group", h.member, got)
		}
	}
}

func testAdoptReleased(t *testing.T, p *place) {
	a, b, c := p.handle(t, "a"), p.handle(t, "b"), p.handle(t, "c")
	join(t, a, "g")
	p.f.Kill(a.Store)
	w, _ := adoptedBy(t, "a", "g", b, c)
	winner, loser := []*handle{b, c}[w], []*handle{b, c}[1-w]
	if err := adopter(t, winner).ReleaseAdoption(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if got := adoptions(t, loser, "g"); len(got) != 1 || got[0].Member != "a" {
		t.Fatalf("%s claimed %v once %s released a's session, want a's", loser.member, got, winner.member)
	}
}

func testAdoptReturned(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	join(t, a, "g")
	p.f.Kill(a.Store)
	_, ad := adoptedBy(t, "a", "g", b)
	a2 := p.handle(t, "a")
	if got := adoptions(t, b, "g"); len(got) != 0 {
		t.Fatalf("b claimed %v with a live again", got)
	}
	if adopted(t, b, ad) {
		t.Fatal("b recorded a out of the group after a took its lease again")
	}
	join(t, a2, "g")
	if adopted(t, b, ad) {
		t.Fatal("b recorded a out of the group after a joined it again")
	}
}
