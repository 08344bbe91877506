package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of the shares of the paths of a member that consumes several
// broker paths at once (engine.SharePaths): each path's session is
// recorded, claimed, recorded out and released on its own, by the rules
// of a member's one session (adopt.go).

func paths(t *testing.T, h *handle) engine.SharePaths {
	t.Helper()
	if h.caps.Paths == nil {
		t.Fatalf("%T declares no Capabilities.Paths", h.Store)
	}
	return h.caps.Paths
}

// pathShare is member's share of group on path, as the cases record it.
func pathShare(member, path, group string) engine.SharePath {
	return engine.SharePath{Path: path, Group: group, ClientID: "client-" + member + "-" + path,
		Brokers: []string{"tcp://" + path + "-1:1883", "tcp://" + path + "-2:1883"}, Filters: []string{"plant/+/energy", "incidents/#"}}
}

func joinPath(t *testing.T, h *handle, path, group string) {
	t.Helper()
	if err := paths(t, h).JoinSharePath(t.Context(), pathShare(h.member, path, group)); err != nil {
		t.Fatalf("%s joins %q on path %s: %v", h.member, group, path, err)
	}
}

func pathAdoptions(t *testing.T, h *handle, path, group string) []engine.Adoption {
	t.Helper()
	got, err := paths(t, h).PathAdopter(path).ClaimAdoptions(t.Context(), group, 0)
	if err != nil {
		t.Fatalf("%s claims the sessions of %q on path %s: %v", h.member, group, path, err)
	}
	return got
}

func pathAdopted(t *testing.T, h *handle, a engine.Adoption) bool {
	t.Helper()
	ok, err := paths(t, h).PathAdopter(a.Path).ShareAdopted(t.Context(), a)
	if err != nil {
		t.Fatalf("%s records %s adopted on path %s: %v", h.member, a.Member, a.Path, err)
	}
	return ok
}

// pathAdoptedBy waits until one of hs claims member's session of group on
// path and returns which, with the adoption; never two at once.
func pathAdoptedBy(t *testing.T, member, path, group string, hs ...*handle) (int, engine.Adoption) {
	t.Helper()
	ttl := claimer(t, hs[0]).ClaimTTL()
	winner, ad := -1, engine.Adoption{}
	eventually(t, ttl, "the session of "+member+" on path "+path+" claimed", func() bool {
		for i, h := range hs {
			for _, a := range pathAdoptions(t, h, path, group) {
				if a.Member != member || a.Path != path {
					t.Fatalf("%s claimed the session of %s on path %s, want only %s's on %s", h.member, a.Member, a.Path, member, path)
				}
				if winner >= 0 && winner != i {
					t.Fatalf("%s and %s both claimed the session of %s on path %s", hs[winner].member, h.member, member, path)
				}
				winner, ad = i, a
			}
		}
		return winner >= 0
	})
	return winner, ad
}

// checkPathAdoption checks that ad is what member recorded on path.
func checkPathAdoption(t *testing.T, ad engine.Adoption, member, path, group string) {
	t.Helper()
	want := pathShare(member, path, group)
	if ad.Member != member || ad.Group != group || ad.ClientID != want.ClientID || ad.Path != path || ad.Holder == "" ||
		!slices.Equal(ad.Brokers, want.Brokers) || !slices.Equal(ad.Filters, want.Filters) {
		t.Fatalf("adoption %+v, want member %s's share %+v with the holder of its lease", ad, member, want)
	}
}

func testPathsAdoptedPathByPath(t *testing.T, p *place) {
	a, b, c := p.handle(t, "a"), p.handle(t, "b"), p.handle(t, "c")
	joinPath(t, a, "x", "g")
	joinPath(t, a, "y", "g")
	joinPath(t, b, "x", "g")
	for range 3 {
		for _, h := range []*handle{b, c} {
			for _, path := range []string{"x", "y"} {
				if got := pathAdoptions(t, h, path, "g"); len(got) != 0 {
					t.Fatalf("%s claimed %v on path %s while every member lives", h.member, got, path)
				}
			}
		}
	}
	if got := adoptions(t, b, "g"); len(got) != 0 {
		t.Fatalf("b claimed %v of the members' one sessions; a recorded only its paths'", got)
	}
	p.f.Kill(a.Store)
	for _, path := range []string{"x", "y"} {
		w, ad := pathAdoptedBy(t, "a", path, "g", b, c)
		checkPathAdoption(t, ad, "a", path, "g")
		winner, loser := []*handle{b, c}[w], []*handle{b, c}[1-w]
		if got := pathAdoptions(t, winner, "z", "g"); len(got) != 0 {
			t.Fatalf("%s claimed %v on a path a never joined", winner.member, got)
		}
		if got := pathAdoptions(t, winner, path, "other"); len(got) != 0 {
			t.Fatalf("%s claimed %v on path %s in a group a never joined", winner.member, got, path)
		}
		if pathAdopted(t, loser, ad) {
			t.Fatalf("%s, without the claim, recorded a out of the group on path %s", loser.member, path)
		}
		if !pathAdopted(t, winner, ad) {
			t.Fatalf("%s, holding the claim, could not record a out of the group on path %s", winner.member, path)
		}
		for _, h := range []*handle{b, c} {
			if got := pathAdoptions(t, h, path, "g"); len(got) != 0 {
				t.Fatalf("%s claimed %v on path %s once a was recorded out of the group there", h.member, got, path)
			}
		}
	}
}

func testPathsQuitAndReleased(t *testing.T, p *place) {
	a, b, c := p.handle(t, "a"), p.handle(t, "b"), p.handle(t, "c")
	joinPath(t, a, "x", "g")
	joinPath(t, a, "y", "g")
	if err := paths(t, a).QuitSharePath(t.Context(), "y", "other"); err != nil {
		t.Fatal(err)
	}
	if err := paths(t, a).QuitSharePath(t.Context(), "x", "g"); err != nil {
		t.Fatal(err)
	}
	p.f.Kill(a.Store)
	w, ad := pathAdoptedBy(t, "a", "y", "g", b, c)
	if !ad.Lost.IsZero() {
		t.Fatalf("a's session on path y, which it never lost (it quit another group there), claimed lost at %v", ad.Lost)
	}
	winner, loser := []*handle{b, c}[w], []*handle{b, c}[1-w]
	// A path whose connection was lost keeps its share, marked lost: gone,
	// its session there is handed over as well, with the loss time.
	_, lost := pathAdoptedBy(t, "a", "x", "g", b, c)
	if lost.Lost.IsZero() {
		t.Fatalf("a's session on path x, which it lost, claimed without its loss time: %+v", lost)
	}
	if err := paths(t, winner).PathAdopter("y").ReleaseAdoption(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if got := pathAdoptions(t, loser, "y", "g"); len(got) != 1 || got[0].Member != "a" {
		t.Fatalf("%s claimed %v on path y once %s released a's session there, want a's", loser.member, got, winner.member)
	}
}

func testPathsLost(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	joinPath(t, a, "x", "g")
	joinPath(t, a, "y", "g")
	if err := paths(t, a).QuitSharePath(t.Context(), "x", "g"); err != nil {
		t.Fatal(err)
	}
	if got, err := paths(t, b).PathAdopter("x").ClaimAdoptions(t.Context(), "g", time.Hour); err != nil || len(got) != 0 {
		t.Fatalf("b claimed %v, %v on path x with a lost there for less than the wait", got, err)
	}
	ad := lostClaimedVia(t, b, paths(t, b).PathAdopter("x"), "a's lost session on path x claimed")
	checkPathAdoption(t, ad, "a", "x", "g")
	if ad.Lost.IsZero() {
		t.Fatalf("a's session on path x claimed without its loss time: %+v", ad)
	}
	if got, err := paths(t, b).PathAdopter("y").ClaimAdoptions(t.Context(), "g", lostWait); err != nil || len(got) != 0 {
		t.Fatalf("b claimed %v, %v on path y, which a holds", got, err)
	}
	joinPath(t, a, "x", "g")
	if pathAdopted(t, b, ad) {
		t.Fatal("b recorded a out of the group on path x after a joined it again")
	}
	if err := paths(t, a).QuitSharePath(t.Context(), "x", "g"); err != nil {
		t.Fatal(err)
	}
	again := lostClaimedVia(t, b, paths(t, b).PathAdopter("x"), "a's session on path x, lost again, claimed")
	if !again.Lost.After(ad.Lost) {
		t.Fatalf("a lost again on path x: loss time %v, want after %v", again.Lost, ad.Lost)
	}
	if pathAdopted(t, b, ad) {
		t.Fatal("b recorded a out on path x by its first loss's adoption")
	}
	if !pathAdopted(t, b, again) {
		t.Fatal("b could not record a out on path x by its second loss's adoption")
	}
}

func testPathsReturned(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	joinPath(t, a, "x", "g")
	p.f.Kill(a.Store)
	_, ad := pathAdoptedBy(t, "a", "x", "g", b)
	a2 := p.handle(t, "a")
	if got := pathAdoptions(t, b, "x", "g"); len(got) != 0 {
		t.Fatalf("b claimed %v on path x with a live again", got)
	}
	if pathAdopted(t, b, ad) {
		t.Fatal("b recorded a out of the group on path x after a took its lease again")
	}
	joinPath(t, a2, "x", "g")
	if pathAdopted(t, b, ad) {
		t.Fatal("b recorded a out of the group on path x after a joined it again")
	}
	p.f.Kill(a2.Store)
	_, again := pathAdoptedBy(t, "a", "x", "g", b)
	if again.Holder == ad.Holder {
		t.Fatalf("a's share on path x, recorded again, names the holder of its first lease %q", ad.Holder)
	}
}

func testPathsApartFromTheOneSession(t *testing.T, p *place) {
	a, b := p.handle(t, "a"), p.handle(t, "b")
	join(t, a, "g")
	p.f.Kill(a.Store)
	_, _ = adoptedBy(t, "a", "g", b)
	if got := pathAdoptions(t, b, "x", "g"); len(got) != 0 {
		t.Fatalf("b claimed %v on path x; a recorded only its one session", got)
	}
	c, d := p.handle(t, "c"), p.handle(t, "d")
	joinPath(t, c, "x", "g")
	p.f.Kill(c.Store)
	_, ad := pathAdoptedBy(t, "c", "x", "g", d)
	checkPathAdoption(t, ad, "c", "x", "g")
	for _, a := range adoptions(t, d, "g") {
		if a.Member == "c" {
			t.Fatalf("d claimed c's one session %+v; c recorded only its path's", a)
		}
	}
}
