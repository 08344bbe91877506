package web

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// newFeedsFixture is newFixture serving the state of two feeds that feeds
// returns.
func newFeedsFixture(t *testing.T, feeds func() []FeedStatus) *fixture {
	t.Helper()
	f := newFixture(t, Config{Version: "feeds-test"})
	deps := f.srv.deps
	deps.Feeds = feeds
	f.http.Close()
	f.srv = New(f.srv.cfg, deps)
	f.http = httptest.NewServer(f.srv.Handler())
	t.Cleanup(f.http.Close)
	return f
}

// GET /api/v1/feeds lists the redundant paths, and none with one path; the
// dashboard shows each feed's connection and the share of messages it
// delivered first, the twins it brought that were applied again (which it
// did not deliver first), and a feed that goes down.
func TestFeedsOnTheAPIAndTheDashboard(t *testing.T) {
	var bDown, bAgain atomic.Bool
	feeds := func() []FeedStatus {
		b := FeedStatus{Name: "b", Connected: !bDown.Load(), Deliveries: 110, First: 10, Duplicates: 100, BehindSeconds: 0.012}
		if bAgain.Load() {
			b.AppliedAgain = 4
		}
		return []FeedStatus{{Name: "a", Connected: true, Deliveries: 120, First: 90, Duplicates: 30}, b}
	}
	f := newFeedsFixture(t, feeds)
	var got struct{ Feeds []FeedStatus }
	f.get("/api/v1/feeds").want(t, 200, &got)
	if len(got.Feeds) != 2 || got.Feeds[1] != (FeedStatus{Name: "b", Connected: true, Deliveries: 110, First: 10, Duplicates: 100, BehindSeconds: 0.012}) {
		t.Fatalf("feeds %+v", got.Feeds)
	}
	one := newFixture(t, Config{Version: "one-path"})
	one.get("/api/v1/feeds").want(t, 200, &got)
	if len(got.Feeds) != 0 {
		t.Fatalf("one path: feeds %+v", got.Feeds)
	}

	chrome := findChromium(t)
	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("both feeds shown", `document.querySelectorAll('#feeds .feed.up').length === 2`)
	if txt := b.eval(`document.querySelector('#feeds [data-feed="a"]').textContent`); !strings.Contains(txt, "90% first") {
		t.Errorf("feed a shows %q, want 90%% first", txt)
	}
	if txt := b.eval(`document.querySelector('#feeds [data-feed="b"]').textContent`); !strings.Contains(txt, "trails 12 ms") {
		t.Errorf("feed b shows %q, want it to trail by 12 ms", txt)
	}
	bAgain.Store(true)
	b.waitFor("feed b's twins applied again shown", `document.querySelector('#feeds [data-feed="b"]').textContent.includes('4 applied again')`)
	if txt := b.eval(`document.querySelector('#feeds [data-feed="a"]').textContent`); !strings.Contains(txt, "94% first") {
		t.Errorf("feed a shows %q, want 94%% first: b's twins applied again were not first", txt)
	}
	bDown.Store(true)
	b.waitFor("feed b shown down", `(() => { const e = document.querySelector('#feeds [data-feed="b"]'); return !!e && e.classList.contains('down') && e.textContent.includes('DOWN'); })()`)
	b.shot("dashboard-feeds")
	oneB := openBrowser(t, chrome, one.http.URL)
	oneB.waitFor("the dashboard loaded", `document.getElementById('live').textContent !== 'connecting…'`)
	if hidden := oneB.eval(`String(document.getElementById('feeds').hidden)`); hidden != "true" {
		t.Errorf("one path: the feeds strip is shown (hidden=%s)", hidden)
	}
}
