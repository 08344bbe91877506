package web

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestADiscardUnderWayIsReportedForItsOwnEntry: the discard dialog opened
// for a second held message while the first's discard is under way does
// not take over the first's answer: the toast names the message discarded,
// not the one whose dialog is open.
func TestADiscardUnderWayIsReportedForItsOwnEntry(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "discard-toast-test"})
	_, conflict, malformed := f.hold()

	b := openBrowser(t, chrome, f.http.URL)
	button := func(id uint64) string { return fmt.Sprintf(`.held-msg[data-id="%d"] button.discard`, id) }
	b.waitFor("the held messages", fmt.Sprintf(`document.querySelector('%s') !== null && document.querySelector('%s') !== null`,
		button(conflict), button(malformed)))
	// A store that takes a while to commit the discard.
	b.eval(`(() => { const fetched = window.fetch; window.fetch = (path, opts) => String(path).endsWith("/discard")
		? new Promise(r => setTimeout(r, 1000)).then(() => fetched(path, opts)) : fetched(path, opts); return ""; })()`)
	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(button(conflict))),
		chromedp.WaitVisible(chromedp.CSS(`#discard-dialog[open]`)),
		chromedp.SendKeys(chromedp.CSS(`#discard-reason`), "meter-3 resent its reading"),
		chromedp.Click(chromedp.CSS(`#discard-ok`)),
		chromedp.Click(chromedp.CSS(button(malformed))),
		chromedp.WaitVisible(chromedp.CSS(`#discard-dialog[open]`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the discard's answer", `document.getElementById('toast').textContent.startsWith('Discarded #')`)
	if got, want := b.eval(`document.getElementById('toast').textContent`), fmt.Sprintf("Discarded #%d", conflict); !strings.HasPrefix(got, want+" ") {
		t.Fatalf("the discard of #%d is reported as %q", conflict, got)
	}
	if got := b.eval(fmt.Sprintf(`String(document.querySelector('.held-msg[data-id="%d"]') !== null)`, malformed)); got != "true" {
		t.Fatalf("held message %d, whose dialog is open, is no longer shown", malformed)
	}
}
