package web

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/engine"
)

// TestAHeldEntryRefusedAgainAfterARetryCanBeRetriedAgain: a retried entry
// that the downstream refuses at once, with the same answer, is held
// again under its own id, and the panel keeps its card. The card's Retry
// button, disabled while the retry was under way, works again: the
// operator retries once dispatch is fixed, without reloading the page.
func TestAHeldEntryRefusedAgainAfterARetryCanBeRetriedAgain(t *testing.T) {
	chrome := findChromium(t)
	hook, url := startDispatchHook(t, hookRefuses)
	f := newForwardingFixture(t, Config{Version: "retry-again-test"}, webhookDrainer(t, 50), forwardAlertsTo(url))
	ctx := context.Background()
	key := f.process(alert("a-1"))[0].Key.String()
	var held []engine.HeldEntry
	eventually(t, "the alert is held", func() bool {
		var err error
		held, err = f.store.OutboxHeld(ctx)
		return err == nil && len(held) == 1
	})
	id := held[0].ID

	b := openBrowser(t, chrome, f.http.URL)
	retry := fmt.Sprintf(`.held-fwd[data-id="%d"] button.retry`, id)
	b.waitFor("the held entry", `document.querySelector('`+retry+`') !== null`)
	// The downstream refuses before the page reads the outbox again.
	b.eval(`(() => { const fetched = window.fetch; window.fetch = (path, opts) => String(path).startsWith("/api/v1/outbox?")
		? new Promise(r => setTimeout(r, 500)).then(() => fetched(path, opts)) : fetched(path, opts); return ""; })()`)
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(retry))); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the retry's answer", `document.getElementById('toast').textContent.startsWith('Retried #')`)
	eventually(t, "the retried alert is held again", func() bool {
		refusals := 0
		f.store.ScanAudit(ctx, 1, func(r engine.AuditRecord) error {
			if r.Outcome == engine.OutcomeForwardHeld && r.Ref == id {
				refusals++
			}
			return nil
		})
		held, err := f.store.OutboxHeld(ctx)
		return err == nil && len(held) == 1 && held[0].ID == id && refusals == 2
	})
	b.waitFor("the retry button back", `document.querySelector('`+retry+`')?.disabled === false`)

	hook.answer.Store(hookTakes)
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(retry))); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the retried entry to leave the panel", fmt.Sprintf(`document.querySelector('.held-fwd[data-id="%d"]') === null`, id))
	eventually(t, "the alert is delivered", func() bool { return hook.copies(key) == 1 })
}
