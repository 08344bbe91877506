package web

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestATokenEnteredWhileTheDashboardCannotReadOpensOneStream: with
// auth_reads the dashboard opened without a token cannot read the event
// stream and tries again every two seconds. The token typed in then opens
// the stream once: the try still pending is not a second stream, whose
// copy of every decision would count each twice, on the tiles and in the
// audit tail.
func TestATokenEnteredWhileTheDashboardCannotReadOpensOneStream(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "token-stream-test", Tokens: namedTokens, AuthReads: true})
	subscribers := func() int {
		f.hub.mu.Lock()
		defer f.hub.mu.Unlock()
		return len(f.hub.subs)
	}

	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("the stream refused", `document.getElementById('live').textContent.includes('token needed')`)
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.CSS(`#token`), "wr0ng\t")); err != nil {
		t.Fatal(err)
	}
	// A wrong token is told as refused, not as one still to enter.
	b.waitFor("the token refused", `document.getElementById('live').textContent.includes('the token entered is refused')`)
	b.eval(`(() => { document.getElementById('token').value = ""; return ""; })()`)
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.CSS(`#token`), "v13wer\t")); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	time.Sleep(3 * time.Second) // past the try that was pending when the token came
	if n := subscribers(); n != 1 {
		t.Fatalf("%d event streams open after the token was entered, want 1", n)
	}

	pos := f.process(meter("m-1", "1.5"))[0].Position
	b.waitFor("the decision", fmt.Sprintf(`state.audit.some(r => r.position === %d)`, pos))
	time.Sleep(500 * time.Millisecond) // a second copy would have come by now
	if got := b.eval(fmt.Sprintf(`document.getElementById('c-applied').textContent + " applied, " +
		state.audit.filter(r => r.position === %d).length + " audit rows"`, pos)); got != "1 applied, 1 audit rows" {
		t.Fatalf("one decision on screen as %s", got)
	}
}
