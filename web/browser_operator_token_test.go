package web

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/engine"
)

// TestTheDashboardSaysATokenCannotReleaseAsSomeoneElse: with tokens the
// token names the operator. A release from the dashboard whose Operator
// field names someone other than the token's holder is refused, the
// message stays held and the toast says why; with the field emptied the
// release goes through, audited as the token's holder.
func TestTheDashboardSaysATokenCannotReleaseAsSomeoneElse(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "operator-token-test", Tokens: namedTokens})
	below, _, _ := f.hold()

	b := openBrowser(t, chrome, f.http.URL)
	card := fmt.Sprintf(`document.querySelector('.held-msg[data-id="%d"]')`, below)
	do := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(b.ctx, actions...); err != nil {
			t.Fatal(err)
		}
	}
	do(chromedp.SendKeys(chromedp.CSS(`#token`), "0perator\t"), chromedp.SendKeys(chromedp.CSS(`#operator`), "duty officer\t"))
	b.waitFor("the held message", card+` !== null`)
	do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`.held-msg[data-id="%d"] button.release`, below))))
	b.waitFor("the refusal", `document.getElementById('toast').textContent.startsWith('Release #`+fmt.Sprint(below)+` failed: ') && `+
		`document.getElementById('toast').textContent.includes('the token names the operator, j.doe')`)
	if got := b.eval(`String(` + card + ` !== null)`); got != "true" {
		t.Fatalf("the refused release took the message out of the quarantine")
	}

	b.eval(`(() => { const i = document.getElementById('operator'); i.value = ''; i.dispatchEvent(new Event('input')); return ""; })()`)
	do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`.held-msg[data-id="%d"] button.release`, below))))
	b.waitFor("the release", card+` === null && document.getElementById('toast').textContent.endsWith(' — audited as j.doe')`)
	var ops []string
	f.store.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
		if r.Ref == below {
			ops = append(ops, r.Operator)
		}
		return nil
	})
	if fmt.Sprint(ops) != "[j.doe]" {
		t.Fatalf("audit records of the release name %v, want [j.doe]", ops)
	}
}
