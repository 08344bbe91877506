package web

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// pastedLog is a reason as an operator pastes a whole log into it: over
// the API's 64 KiB request limit, which refuses it with 413, not 400.
var pastedLog = "meter-3 resent its reading: " + strings.Repeat("2026-11-30T12:00:00Z meter-3 reset; ", 2000)

// TestADiscardReasonOverTheRequestLimitStaysInItsDialog: a reason so long
// that the API refuses the request itself (413) is refused like any other
// reason: its dialog stays open with the operator's text and the server's
// words, and no entry is discarded.
func TestADiscardReasonOverTheRequestLimitStaysInItsDialog(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "reason-limit-test"})
	_, conflict, _ := f.hold()

	b := openBrowser(t, chrome, f.http.URL)
	discard := fmt.Sprintf(`.held-msg[data-id="%d"] button.discard`, conflict)
	b.waitFor("the held message", `document.querySelector('`+discard+`') !== null`)
	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(discard)),
		chromedp.WaitVisible(chromedp.CSS(`#discard-dialog[open]`)),
		chromedp.SetValue(chromedp.CSS(`#discard-reason`), pastedLog),
		chromedp.Click(chromedp.CSS(`#discard-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the refusal", `document.getElementById('toast').textContent.includes('request body too large')`)
	if got := b.eval(`String(document.getElementById('discard-dialog').open)`); got != "true" {
		t.Fatalf("the dialog closed with the refused reason; the toast says %q", toastOf(b))
	}
	if got := b.eval(`document.getElementById('discard-reason').value`); got != pastedLog {
		t.Fatalf("the reason field holds %d bytes, want the %d pasted", len(got), len(pastedLog))
	}
	if got := b.eval(`document.getElementById('discard-error')?.checkVisibility() ? document.getElementById('discard-error').textContent : ""`); !strings.Contains(got, "request body too large") {
		t.Fatalf("the dialog shows %q, want the server's refusal", got)
	}
	if _, err := f.store.Quarantined(context.Background(), conflict); err != nil {
		t.Fatalf("entry #%d after the refused discard: %v", conflict, err)
	}
}

// TestADropReasonOverTheRequestLimitStaysInItsDialog: the same for the
// drop of a held forward entry.
func TestADropReasonOverTheRequestLimitStaysInItsDialog(t *testing.T) {
	chrome := findChromium(t)
	_, url := startDispatchHook(t, hookRefuses)
	f := newForwardingFixture(t, Config{Version: "drop-limit-test"}, webhookDrainer(t, 50), forwardAlertsTo(url))
	id := f.refusedAlerts(t, "a-1")[0]

	b := openBrowser(t, chrome, f.http.URL)
	drop := fmt.Sprintf(`.held-fwd[data-id="%d"] button.drop`, id)
	b.waitFor("the held entry", `document.querySelector('`+drop+`') !== null`)
	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(drop)),
		chromedp.WaitVisible(chromedp.CSS(`#drop-dialog[open]`)),
		chromedp.SetValue(chromedp.CSS(`#drop-reason`), pastedLog),
		chromedp.Click(chromedp.CSS(`#drop-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the refusal", `document.getElementById('toast').textContent.includes('request body too large')`)
	if got := b.eval(`String(document.getElementById('drop-dialog').open)`); got != "true" {
		t.Fatalf("the dialog closed with the refused reason; the toast says %q", toastOf(b))
	}
	if got := b.eval(`document.getElementById('drop-reason').value`); got != pastedLog {
		t.Fatalf("the reason field holds %d bytes, want the %d pasted", len(got), len(pastedLog))
	}
	if got := b.eval(`document.getElementById('drop-error')?.checkVisibility() ? document.getElementById('drop-error').textContent : ""`); !strings.Contains(got, "request body too large") {
		t.Fatalf("the dialog shows %q, want the server's refusal", got)
	}
	if held, err := f.store.OutboxHeld(context.Background()); err != nil || len(held) != 1 {
		t.Fatalf("held entries after the refused drop: %v, %v", held, err)
	}
}
