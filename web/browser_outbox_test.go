package web

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/engine"
)

func TestOutboxPanelInABrowser(t *testing.T) {
	chrome := findChromium(t)
	// Dispatch's webhook refuses unit u7's alerts with 422 until it is
	// fixed; the drainer holds them for an operator.
	hook, url := startDispatchHook(t, hookRefuses)
	f := newForwardingFixture(t, Config{Version: "outbox-test", Tokens: namedTokens}, webhookDrainer(t, 50), forwardAlertsTo(url))
	ctx := context.Background()
	decs := f.process(alert("a-1"), alert("a-2"))
	retried, dropped := decs[0].Key.String(), decs[1].Key.String()
	var held []engine.HeldEntry
	eventually(t, "both alerts are held", func() bool {
		var err error
		held, err = f.store.OutboxHeld(ctx)
		return err == nil && len(held) == 2
	})
	retriedID, droppedID := held[0].ID, held[1].ID

	b := openBrowser(t, chrome, f.http.URL)
	card := func(id uint64) string { return fmt.Sprintf(`document.querySelector('.held-fwd[data-id="%d"]')`, id) }
	output := `document.querySelector('#outputs tr[data-output="webhook"]')`
	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	b.waitFor("the outbox panel", `!document.getElementById('outbox-panel').classList.contains('collapsed')`)
	b.waitFor("the held entries", fmt.Sprintf(`document.querySelectorAll('.held-fwd').length === 2 && %s !== null`, card(droppedID)))
	if got := b.eval(card(retriedID) + `.querySelector('.reason').textContent`); got != `HTTP 422 Unprocessable Entity: {"error":"unit u7 is unknown to dispatch"}` {
		t.Fatalf("held entry's reason %q: want the webhook's 422 answer", got)
	}
	if got := b.eval(fmt.Sprintf(`[%[1]s.querySelector('.target').textContent, %[1]s.querySelector('.key').textContent,
		%[1]s.querySelector('.meta').textContent.split(' · ').slice(0, 2).join(' ')].join('|')`, card(retriedID))); got !=
		url+"|"+retried+"|alerts alerts/u7" {
		t.Fatalf("held entry shows %q: want target, key, route and topic", got)
	}
	b.waitFor("the output's counts", output+`?.querySelector('td.n-held').textContent === '2' && `+output+`.querySelector('td.state').textContent === 'ok'`)
	if got := b.eval(`document.querySelector('#outbox-depth .depth .n').textContent + ' | ' + document.getElementById('outbox-summary').textContent`); got !=
		"0 of 50 | 0 pending · 2 held" {
		t.Fatalf("outbox depth %q", got)
	}
	b.eval(`window.__sameDocument = "yes"`)
	b.eval(`document.querySelectorAll('.held-fwd').forEach(c => { c.dataset.drawn = "first" }); ""`)

	// Dispatch goes down: a new alert waits in the outbox, and the panel
	// shows the output failing with dispatch's answer.
	hook.answer.Store(hookDown)
	later := f.process(alert("a-3"))[0].Key.String()
	b.waitFor("the failing output", output+`?.classList.contains('failing') && `+output+
		`.querySelector('td.state .error').textContent.includes('503 Service Unavailable: dispatch is restarting')`)
	b.waitFor("the pending alert", `document.querySelector('#outbox-depth .depth .n').textContent === '1 of 50'`)
	b.shot("dashboard-outbox-failing.png")

	// Dispatch is fixed: the waiting alert is delivered.
	hook.answer.Store(hookTakes)
	b.waitFor("the output to recover", output+`?.querySelector('td.state').textContent === 'ok' && `+
		output+`.querySelector('td.n-delivered').textContent.split(' ')[0] === '1' && `+
		`document.querySelector('#outbox-depth .depth .n').textContent === '0 of 50'`)

	// Reading the same held entries again keeps their cards.
	b.eval(`(() => { window.__reread = false; loadOutbox().then(() => { window.__reread = true; }); return ""; })()`)
	b.waitFor("the outbox read again", `window.__reread === true`)
	if got := b.eval(`[...document.querySelectorAll('.held-fwd')].map(c => c.dataset.drawn).join(' ')`); got != "first first" {
		t.Fatalf("held cards after the same entries were read again: %q, want the cards first drawn", got)
	}

	// Retry needs an operator's token: without one it is refused and the
	// entry stays; with one it is delivered once and leaves the panel.
	click := func(sel string) {
		t.Helper()
		if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
			t.Fatal(err)
		}
	}
	retry := fmt.Sprintf(`.held-fwd[data-id="%d"] button.retry`, retriedID)
	click(retry)
	b.waitFor("the refusal", `document.getElementById('toast').textContent.includes('missing or wrong bearer token')`)
	b.waitFor("the retry button back", `!document.querySelector('`+retry+`').disabled`)
	if n := hook.copies(retried); n != 0 {
		t.Fatalf("the hook took %d copies of a retry that was refused", n)
	}
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.CSS(`#token`), "0perator\t")); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the token stored", `sessionStorage.getItem('replayguard.token') === '0perator'`)
	click(retry)
	b.waitFor("the retried entry to leave the panel", card(retriedID)+` === null`)
	eventually(t, "the retried entry is delivered", func() bool {
		n, err := f.store.OutboxDepth(ctx, "")
		return err == nil && n == 0 && hook.copies(retried) > 0
	})
	if n := hook.copies(retried); n != 1 {
		t.Fatalf("the hook took %d copies of the retried entry, want 1", n)
	}

	// Drop the other, with a reason: audited as forward_dropped by the
	// token's operator, never delivered.
	reason := "u7 was decommissioned; dispatch was told by phone"
	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`.held-fwd[data-id="%d"] button.drop`, droppedID))),
		chromedp.WaitVisible(chromedp.CSS(`#drop-dialog[open]`)),
		chromedp.SendKeys(chromedp.CSS(`#drop-reason`), reason),
		chromedp.Click(chromedp.CSS(`#drop-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the dropped entry to leave the panel", card(droppedID)+` === null && document.querySelector('#outbox-held .empty') !== null`)
	b.waitFor("the drop in the audit tail", `[...document.querySelectorAll('#audit .badge')].some(b => b.textContent === 'forward_dropped')`)
	b.waitFor("the summary", `document.getElementById('outbox-summary').textContent === '0 pending · 0 held'`)
	if got := b.eval(`window.__sameDocument || "reloaded"`); got != "yes" {
		t.Fatalf("the page reloaded (%s)", got)
	}
	b.shot("dashboard-outbox-after-review.png")

	var resolved []engine.AuditRecord
	f.store.ScanAudit(ctx, 1, func(r engine.AuditRecord) error {
		if r.Outcome == engine.OutcomeForwardRetried || r.Outcome == engine.OutcomeForwardDropped {
			resolved = append(resolved, r)
		}
		return nil
	})
	if len(resolved) != 2 || resolved[0].Outcome != engine.OutcomeForwardRetried || resolved[0].Ref != retriedID ||
		resolved[0].Operator != "j.doe" || resolved[1].Outcome != engine.OutcomeForwardDropped || resolved[1].Ref != droppedID ||
		resolved[1].Reason != reason || resolved[1].Operator != "j.doe" {
		t.Fatalf("audit records of the retry and the drop: %+v", resolved)
	}
	if n := hook.copies(dropped); n != 0 {
		t.Fatalf("the hook took %d copies of the dropped entry", n)
	}
	if n := hook.copies(later); n != 1 {
		t.Fatalf("the hook took %d copies of the alert that waited, want 1", n)
	}
}
