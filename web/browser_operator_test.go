package web

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/engine"
)

// TestAReleaseFromTheDashboardIsAuditedAsTheOperatorNamedThere: without
// tokens (open writes on loopback) the dashboard sends the name typed in
// its operator field, and the audit record of a release names that
// operator. The name is remembered across a reload, so a discard after one
// names them too; with the field emptied the dashboard says that no name
// will be recorded, and a discard still goes through, audited without one.
func TestAReleaseFromTheDashboardIsAuditedAsTheOperatorNamedThere(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "operator-test"})
	below, conflict, malformed := f.hold()
	const name = "duty officer"

	b := openBrowser(t, chrome, f.http.URL)
	card := func(id uint64) string { return fmt.Sprintf(`document.querySelector('.held-msg[data-id="%d"]')`, id) }
	do := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(b.ctx, actions...); err != nil {
			t.Fatal(err)
		}
	}
	discard := func(id uint64, reason string) {
		t.Helper()
		do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`.held-msg[data-id="%d"] button.discard`, id))),
			chromedp.WaitVisible(chromedp.CSS(`#discard-dialog[open]`)),
			chromedp.SendKeys(chromedp.CSS(`#discard-reason`), reason),
			chromedp.Click(chromedp.CSS(`#discard-ok`)))
		b.waitFor("the discarded message to leave the quarantine", card(id)+` === null`)
	}
	audited := func(ref uint64) engine.AuditRecord {
		t.Helper()
		var got []engine.AuditRecord
		f.store.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
			if r.Ref == ref {
				got = append(got, r)
			}
			return nil
		})
		if len(got) != 1 {
			t.Fatalf("audit records of quarantine entry %d: %+v, want one", ref, got)
		}
		return got[0]
	}

	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	b.waitFor("the held messages", card(below)+` !== null && `+card(conflict)+` !== null && `+card(malformed)+` !== null`)
	do(chromedp.SendKeys(chromedp.CSS(`#operator`), name+"\t"))
	do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`.held-msg[data-id="%d"] button.release`, below))))
	b.waitFor("the released message to leave the quarantine", card(below)+` === null`)
	if r := audited(below); r.Operator != name {
		t.Fatalf("the release (audit record %d, %s) is audited as %q, want the operator named in the dashboard, %q",
			r.Position, r.Reason, r.Operator, name)
	}
	b.waitFor("the release's answer", `document.getElementById('toast').textContent.endsWith(' — audited as duty officer')`)

	// The name is remembered: after a reload the field holds it and a
	// discard names the operator too.
	do(chromedp.Reload())
	b.waitFor("the name again", `document.getElementById('operator').value === 'duty officer' && document.getElementById('operator-note').hidden`)
	b.waitFor("the held messages again", card(conflict)+` !== null`)
	discard(conflict, "the reading was corrected by hand")
	if r := audited(conflict); r.Operator != name || r.Outcome != engine.OutcomeDiscarded {
		t.Fatalf("the discard (audit record %d, %s) is audited as %q, want %q", r.Position, r.Outcome, r.Operator, name)
	}

	// With no name (and no token) the dashboard says so; the write still
	// goes through, as the API takes it, and its answer says it was
	// audited without a name.
	b.eval(`(() => { const i = document.getElementById('operator'); i.value = ' '; i.dispatchEvent(new Event('input')); return ""; })()`)
	b.waitFor("the note that no name is given", `!document.getElementById('operator-note').hidden && localStorage.getItem('replayguard.operator') === ''`)
	discard(malformed, "bench noise")
	if r := audited(malformed); r.Operator != "" {
		t.Fatalf("a discard with no name given is audited as %q", r.Operator)
	}
	b.waitFor("the discard's answer", `document.getElementById('toast').textContent.endsWith(" — audited without an operator's name")`)
	b.shot("dashboard-operator.png")
}
