package web

import (
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// The event stream stays open while the consumer is not ready (its broker
// or its store down stops the decisions, not the stream): the badge says
// LIVE · NOT READY with /readyz's reason beside it, and LIVE again, the
// reason gone, once the consumer is ready. It said LIVE throughout.
func TestTheBadgeSaysWhyTheConsumerIsNotReady(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "ready-test"})
	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("the stream", `document.getElementById('live').textContent === 'LIVE' && document.getElementById('ready-why').hidden`)

	f.status.Store(&StoreStatus{Error: "the last commit failed: redis store: dial tcp 127.0.0.1:6390: connection refused"})
	f.ready.Store(false)
	b.waitFor("the badge to say not ready, and why", `document.getElementById('live').textContent === 'LIVE · NOT READY' &&
		!document.getElementById('ready-why').hidden &&
		document.getElementById('ready-why').textContent === 'the last commit failed: redis store: dial tcp 127.0.0.1:6390: connection refused'`)

	f.status.Store(&StoreStatus{Warning: "feed b is not connected: consuming from the other path"})
	f.ready.Store(true)
	b.waitFor("the badge to say LIVE, with the warning", `document.getElementById('live').textContent === 'LIVE' &&
		document.getElementById('ready-why').textContent === 'feed b is not connected: consuming from the other path'`)
	f.status.Store(&StoreStatus{})
	b.waitFor("the warning gone", `document.getElementById('ready-why').hidden`)
}

// In a window 400 pixels wide the panels stand one under the other and
// the page scrolls: a wheel reaches the quarantine, its release and
// discard, which lay off the screen out of reach, and nothing is wider
// than the window.
func TestANarrowWindowScrollsToEveryPanel(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "narrow-test"})
	f.hold()
	b := openBrowser(t, chrome, f.http.URL)
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(400, 800)); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the held messages", `document.querySelector('.held-msg button.discard') !== null`)
	if got := b.eval(`String(document.documentElement.scrollWidth <= innerWidth)`); got != "true" {
		t.Errorf("the page is %s pixels wide in a window of 400", b.eval(`String(document.documentElement.scrollWidth)`))
	}
	inView := `(() => { const r = document.querySelector('.held-msg button.discard').getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })()`
	for range 20 { // wheel down until the quarantine's buttons are in view
		if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](inView, chromedp.WithPollingTimeout(250*time.Millisecond))); err == nil {
			return
		}
		wheel := func(p *input.DispatchMouseEventParams) { p.DeltaX, p.DeltaY = 1, 600 } // a deltaX of 0 is left out, and refused
		if err := chromedp.Do(b.ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseWheel, 200, 400, wheel)); err != nil {
			t.Fatal(err)
		}
	}
	b.shot(t.Name() + "-failure.png")
	t.Fatalf("the quarantine's discard button never came into view by the wheel: at %s, the page scrolled to %s",
		b.eval(`String(document.querySelector('.held-msg button.discard').getBoundingClientRect().top)`), b.eval(`String(scrollY)`))
}

// Between the narrow layout and a wide screen nothing runs off the right
// edge, where the page does not scroll: the header wraps, with a long
// reason not ready beside the badge, and the panels' columns shrink to the
// window. At 901 to about 1,260 pixels the header and the panels ran
// past it, the token field and the last tile out of reach.
func TestEveryWidthFitsTheWindow(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "widths-test"})
	f.hold()
	f.status.Store(&StoreStatus{Error: "the last commit failed: postgres store: failed to connect to `user=replayguard database=ops`: 127.0.0.1:5432 (127.0.0.1): dial error: dial tcp 127.0.0.1:5432: connect: connection refused"})
	f.ready.Store(false)
	b := openBrowser(t, chrome, f.http.URL)
	for _, width := range []int64{901, 1000, 1100, 1200, 1280} {
		if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(width, 800)); err != nil {
			t.Fatal(err)
		}
		b.waitFor("the reason not ready", `document.getElementById('live').textContent === 'LIVE · NOT READY' && document.querySelector('.held-msg') !== null`)
		fits := `(() => { const w = innerWidth, right = (q) => document.querySelector(q).getBoundingClientRect().right;
			return document.documentElement.scrollWidth <= w && right('#token') <= w && right('.tile.gaps') <= w && right('#quarantine-panel') <= w; })()`
		if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](fits, chromedp.WithPollingTimeout(2*time.Second))); err != nil {
			b.shot(t.Name() + "-failure.png")
			t.Errorf("at %d pixels wide: the page is %s wide, the token field ends at %s, the quarantine at %s", width,
				b.eval(`String(document.documentElement.scrollWidth)`), b.eval(`String(document.getElementById('token').getBoundingClientRect().right)`),
				b.eval(`String(document.getElementById('quarantine-panel').getBoundingClientRect().right)`))
		}
	}
}

// In a window 400 pixels wide the badge's longest words, a stream refused
// for its token, wrap within the window: on one line they made the page
// wider than it, where nothing scrolls sideways.
func TestANarrowWindowFitsTheDisconnectedBadge(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "narrow-down"})
	b := openBrowser(t, chrome, f.http.URL)
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(400, 800)); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	b.eval(`setLive(false, "disconnected — the token entered is refused (missing or wrong)"), ""`)
	if got := b.eval(`String(document.documentElement.scrollWidth <= innerWidth)`); got != "true" {
		t.Errorf("the page is %s pixels wide in a window of 400, the badge %s", b.eval(`String(document.documentElement.scrollWidth)`),
			b.eval(`String(document.getElementById('live').getBoundingClientRect().width)`))
	}
}
