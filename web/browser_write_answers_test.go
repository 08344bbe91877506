package web

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// withSparkplug adds a Sparkplug B route to the fixture's engine: an
// NDATA decided before its edge's NBIRTH is held, and a release of it
// while no NBIRTH came is held again, under a new entry.
func withSparkplug(o *engine.Options) {
	o.Routes = append(slices.Clone(o.Routes), engine.Route{Name: "plant", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[3]}", Add: map[string]string{"pulses": "metrics.Pulses"}}}})
	o.Kinds = append(o.Kinds, sparkplug.RouteKind{})
}

// holdUnborn holds an NDATA of edge m1, whose NBIRTH never came, and
// returns its entry.
func (f *fixture) holdUnborn() uint64 {
	f.t.Helper()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	pulses := []sparkplug.Metric{{Name: "Pulses", Datatype: sparkplug.Int64, Value: int64(1)}}
	edge.Birth(time.Now(), pulses) // never sent
	data := edge.Data(time.Now(), pulses)
	d := f.process(engine.Message{Topic: data.Topic, Payload: data.Payload})[0]
	if d.Outcome != engine.Quarantined || d.Held == 0 {
		f.t.Fatalf("NDATA before its NBIRTH: %+v, want held", d)
	}
	return d.Held
}

// failReads makes the page's reads of path (a prefix) answer 503 from
// now on, as a server restarting would: the writes still go through.
func failReads(b *browser, path string) {
	b.eval(fmt.Sprintf(`(() => { const fetched = window.fetch; window.fetch = (path, opts) => String(path).startsWith(%q)
		? Promise.resolve(new Response('{"error":"the store is restarting"}', { status: 503, headers: { "Content-Type": "application/json" } }))
		: fetched(path, opts); return ""; })()`, path))
}

func toastOf(b *browser) string { return b.eval(`document.getElementById('toast').textContent`) }

// recordToasts keeps every toast the page shows from now on, in order, in
// window.__toasts: the reloads the event stream asks for may fail too, and
// say so in toasts of their own.
func recordToasts(b *browser) {
	b.eval(`(() => { const shown = window.toast; window.__toasts = [];
		window.toast = (msg, good) => { window.__toasts.push(msg); shown(msg, good); }; return ""; })()`)
}

// lastWord waits for the toast that ends the story of the write on entry
// id, which starts "<done> #id" or "<failed> #id": the reload's failure
// after the write's answer, or the write's failure.
func lastWord(b *browser, done, failed string, id uint64) string {
	b.t.Helper()
	find := fmt.Sprintf(`window.__toasts.find(m => (m.startsWith("%s #%d") || m.startsWith("%s #%d")) && /could not be reloaded|failed/.test(m))`,
		done, id, failed, id)
	b.waitFor(fmt.Sprintf("the answer to %s #%d", failed, id), find+` !== undefined`)
	return b.eval(find)
}

// TestAReleaseHeldAgainIsToldAsHeldAgain: a release the engine holds
// again (a Sparkplug NDATA whose NBIRTH still has not come) is no
// success: the toast says it was held again and names the new entry,
// which the panel shows in the released entry's place.
func TestAReleaseHeldAgainIsToldAsHeldAgain(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "held-again-test"}, withSparkplug)
	id := f.holdUnborn()

	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("the held message", fmt.Sprintf(`document.querySelector('.held-msg[data-id="%d"] button.release') !== null`, id))
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.held-msg[data-id="%d"] button.release`, id)))); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the release's answer", `document.getElementById('toast').classList.contains('show')`)
	var again uint64
	f.store.ScanQuarantine(context.Background(), func(q engine.QuarantineEntry) error {
		again = q.ID
		return nil
	})
	if again == 0 || again == id {
		t.Fatalf("held again as #%d after releasing #%d", again, id)
	}
	want := fmt.Sprintf("Release #%d was held again as #%d: quarantined (", id, again)
	if got := toastOf(b); !strings.HasPrefix(got, want) || !strings.Contains(got, "no birth certificate seen") {
		t.Fatalf("toast %q, want it to start %q", got, want)
	}
	if got := b.eval(`document.getElementById('toast').className`); got != "show" {
		t.Fatalf("toast class %q: a release held again is not shown as a success", got)
	}
	b.waitFor("the new entry in the released one's place", fmt.Sprintf(`document.querySelector('.held-msg[data-id="%d"]') !== null && `+
		`document.querySelector('.held-msg[data-id="%d"]') === null`, again, id))
}

// TestAWriteThatSucceededIsNotToldFailedWhenTheReloadFails: a release and
// a discard that the server committed are reported done, even when the
// panel's reload after them fails; the toast tells the reload's failure
// apart, and no toast says the write failed.
func TestAWriteThatSucceededIsNotToldFailedWhenTheReloadFails(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "reload-test"})
	below, conflict, _ := f.hold()

	b := openBrowser(t, chrome, f.http.URL)
	button := func(id uint64, kind string) string { return fmt.Sprintf(`.held-msg[data-id="%d"] button.%s`, id, kind) }
	b.waitFor("the held messages", fmt.Sprintf(`document.querySelector('%s') !== null && document.querySelector('%s') !== null`,
		button(below, "release"), button(conflict, "discard")))
	recordToasts(b)
	failReads(b, "/api/v1/quarantine?")
	answer := func(done, failed string, id uint64) string { t.Helper(); return lastWord(b, done, failed, id) }

	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(button(below, "release")))); err != nil {
		t.Fatal(err)
	}
	if got, want := answer("Released", "Release", below), fmt.Sprintf("Released #%d: applied", below); !strings.HasPrefix(got, want) ||
		!strings.Contains(got, "The panel could not be reloaded: the store is restarting") {
		t.Fatalf("toast %q: want the release told done (%q…) and the reload's failure apart", got, want)
	}

	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(button(conflict, "discard"))),
		chromedp.WaitVisible(chromedp.CSS(`#discard-dialog[open]`)),
		chromedp.SendKeys(chromedp.CSS(`#discard-reason`), "meter-3 resent its reading"),
		chromedp.Click(chromedp.CSS(`#discard-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	if got, want := answer("Discarded", "Discard", conflict), fmt.Sprintf("Discarded #%d", conflict); !strings.HasPrefix(got, want) ||
		!strings.Contains(got, "The panel could not be reloaded: the store is restarting") {
		t.Fatalf("toast %q: want the discard told done (%q…) and the reload's failure apart", got, want)
	}
	if failed := b.eval(`window.__toasts.filter(m => m.includes("failed")).join(" | ")`); failed != "" {
		t.Fatalf("a write that went through is told failed: %s", failed)
	}
	var resolved []uint64
	f.store.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
		if r.Ref != 0 {
			resolved = append(resolved, r.Ref)
		}
		return nil
	})
	if !slices.Equal(resolved, []uint64{below, conflict}) {
		t.Fatalf("resolved entries %v, want %d and %d", resolved, below, conflict)
	}
}

// TestAnOutboxWriteThatSucceededIsNotToldFailedWhenTheReloadFails: a
// retry and a drop of held forward entries that the server committed are
// reported done, even when the outbox panel's reload after them fails.
func TestAnOutboxWriteThatSucceededIsNotToldFailedWhenTheReloadFails(t *testing.T) {
	chrome := findChromium(t)
	_, url := startDispatchHook(t, hookRefuses)
	f := newForwardingFixture(t, Config{Version: "outbox-reload-test"}, webhookDrainer(t, 50), forwardAlertsTo(url))
	ids := f.refusedAlerts(t, "a-1", "a-2")
	retried, dropped := ids[0], ids[1]

	b := openBrowser(t, chrome, f.http.URL)
	button := func(id uint64, kind string) string { return fmt.Sprintf(`.held-fwd[data-id="%d"] button.%s`, id, kind) }
	b.waitFor("the held entries", fmt.Sprintf(`document.querySelector('%s') !== null && document.querySelector('%s') !== null`,
		button(retried, "retry"), button(dropped, "drop")))
	recordToasts(b)
	failReads(b, "/api/v1/outbox?")

	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(button(retried, "retry")))); err != nil {
		t.Fatal(err)
	}
	if got, want := lastWord(b, "Retried", "Retry", retried), fmt.Sprintf("Retried #%d: back in the outbox", retried); !strings.HasPrefix(got, want) ||
		!strings.Contains(got, "The panel could not be reloaded: the store is restarting") {
		t.Fatalf("toast %q: want the retry told done (%q…) and the reload's failure apart", got, want)
	}
	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(button(dropped, "drop"))),
		chromedp.WaitVisible(chromedp.CSS(`#drop-dialog[open]`)),
		chromedp.SendKeys(chromedp.CSS(`#drop-reason`), "u7 was decommissioned"),
		chromedp.Click(chromedp.CSS(`#drop-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	if got, want := lastWord(b, "Dropped", "Drop", dropped), fmt.Sprintf("Dropped #%d", dropped); !strings.HasPrefix(got, want) ||
		!strings.Contains(got, "The panel could not be reloaded: the store is restarting") {
		t.Fatalf("toast %q: want the drop told done (%q…) and the reload's failure apart", got, want)
	}
	if failed := b.eval(`window.__toasts.filter(m => m.includes("failed")).join(" | ")`); failed != "" {
		t.Fatalf("a write that went through is told failed: %s", failed)
	}
	var resolved []string
	f.store.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
		if r.Outcome == engine.OutcomeForwardRetried || r.Outcome == engine.OutcomeForwardDropped {
			resolved = append(resolved, fmt.Sprintf("%s #%d", r.Outcome, r.Ref))
		}
		return nil
	})
	if want := []string{fmt.Sprintf("forward_retried #%d", retried), fmt.Sprintf("forward_dropped #%d", dropped)}; !slices.Equal(resolved, want) {
		t.Fatalf("audited %v, want %v", resolved, want)
	}
}

// TestADiscardReasonTheServerRefusesStaysInItsDialog: a reason the API
// refuses (a control character pasted with it) leaves the dialog open
// with the operator's text and the server's words; corrected, it goes
// through.
func TestADiscardReasonTheServerRefusesStaysInItsDialog(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "refused-reason-test"})
	_, conflict, _ := f.hold()

	b := openBrowser(t, chrome, f.http.URL)
	discard := fmt.Sprintf(`.held-msg[data-id="%d"] button.discard`, conflict)
	b.waitFor("the held message", `document.querySelector('`+discard+`') !== null`)
	typed := "meter-3 resent m3-1\u0007 after a reset"
	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(discard)),
		chromedp.WaitVisible(chromedp.CSS(`#discard-dialog[open]`)),
		chromedp.SetValue(chromedp.CSS(`#discard-reason`), typed),
		chromedp.Click(chromedp.CSS(`#discard-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the refusal", `document.getElementById('toast').textContent.includes('has control characters')`)
	if got := b.eval(`String(document.getElementById('discard-dialog').open)`); got != "true" {
		t.Fatalf("the dialog closed with the refused reason; the toast says %q", toastOf(b))
	}
	if got := b.eval(`document.getElementById('discard-reason').value`); got != typed {
		t.Fatalf("the reason field holds %q, want what was typed, %q", got, typed)
	}
	if got := b.eval(`document.getElementById('discard-error')?.checkVisibility() ? document.getElementById('discard-error').textContent : ""`); !strings.Contains(got, "has control characters") {
		t.Fatalf("the dialog shows %q, want the server's refusal", got)
	}
	if got := b.eval(`document.getElementById('discard-id').textContent`); got != fmt.Sprintf("#%d", conflict) {
		t.Fatalf("the dialog is for %s, want #%d", got, conflict)
	}

	if err := chromedp.Do(b.ctx,
		chromedp.SetValue(chromedp.CSS(`#discard-reason`), "meter-3 resent m3-1 after a reset"),
		chromedp.Click(chromedp.CSS(`#discard-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the discarded message to leave the quarantine", fmt.Sprintf(`document.querySelector('.held-msg[data-id="%d"]') === null`, conflict))
	if got := b.eval(`String(document.getElementById('discard-dialog').open) + " " + document.getElementById('discard-error').textContent`); got != "false " {
		t.Fatalf("after the discard: dialog open, error = %q", got)
	}
}

// TestADropReasonTheServerRefusesStaysInItsDialog: a drop reason the API
// refuses (a pasted log over 4,096 bytes) leaves the drop dialog open with
// the operator's text and the server's words; shortened, it goes through.
func TestADropReasonTheServerRefusesStaysInItsDialog(t *testing.T) {
	chrome := findChromium(t)
	_, url := startDispatchHook(t, hookRefuses)
	f := newForwardingFixture(t, Config{Version: "refused-drop-test"}, webhookDrainer(t, 50), forwardAlertsTo(url))
	id := f.refusedAlerts(t, "a-1")[0]

	b := openBrowser(t, chrome, f.http.URL)
	drop := fmt.Sprintf(`.held-fwd[data-id="%d"] button.drop`, id)
	b.waitFor("the held entry", `document.querySelector('`+drop+`') !== null`)
	typed := "u7 decommissioned: " + strings.Repeat("log line ", 460)
	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(drop)),
		chromedp.WaitVisible(chromedp.CSS(`#drop-dialog[open]`)),
		chromedp.SetValue(chromedp.CSS(`#drop-reason`), typed),
		chromedp.Click(chromedp.CSS(`#drop-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the refusal", `document.getElementById('toast').textContent.includes('reason is over 4096 bytes')`)
	if got := b.eval(`String(document.getElementById('drop-dialog').open)`); got != "true" {
		t.Fatalf("the dialog closed with the refused reason; the toast says %q", toastOf(b))
	}
	if got := b.eval(`document.getElementById('drop-reason').value`); got != typed {
		t.Fatalf("the reason field holds %d bytes, want the %d typed", len(got), len(typed))
	}
	if got := b.eval(`document.getElementById('drop-error')?.checkVisibility() ? document.getElementById('drop-error').textContent : ""`); got != "reason is over 4096 bytes" {
		t.Fatalf("the dialog shows %q, want the server's refusal", got)
	}

	if err := chromedp.Do(b.ctx,
		chromedp.SetValue(chromedp.CSS(`#drop-reason`), "u7 decommissioned"),
		chromedp.Click(chromedp.CSS(`#drop-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the dropped entry to leave the panel", fmt.Sprintf(`document.querySelector('.held-fwd[data-id="%d"]') === null`, id))
	if got := b.eval(`String(document.getElementById('drop-dialog').open) + " " + document.getElementById('drop-error').textContent`); got != "false " {
		t.Fatalf("after the drop: dialog open, error = %q", got)
	}
}
