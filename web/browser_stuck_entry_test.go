package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/engine"
)

// TestTheDashboardShowsAnEntryTheDownstreamKeepsRefusingAndHoldsIt:
// dispatch answers 503 to one alert alone, for ever, echoing the alert's
// msgId (a producer's string holding markup and a bidirectional
// override), and takes the others. The outbox panel names the entry the
// webhook output waits at (id, target, key, the downstream's answer,
// attempts), says what to do (hold it, with the command), and its Hold
// button, asking for a reason, sets it aside: the alerts behind it are
// delivered and the entry is held, audited under the operator's name. The
// producer's string is shown as text, never obeyed.
func TestTheDashboardShowsAnEntryTheDownstreamKeepsRefusingAndHoldsIt(t *testing.T) {
	chrome := findChromium(t)
	const evil = "<img src=x onerror=\"window.__xss=1\">\u202eb-2"
	var mu sync.Mutex
	var took []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ MsgID string }
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		if body.MsgID == evil {
			http.Error(w, "dispatch cannot route "+body.MsgID, http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		took = append(took, body.MsgID)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	delivered := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(took, ",")
	}
	url := srv.URL + "/dispatch"
	f := newForwardingFixture(t, Config{Version: "stuck-entry-test"}, webhookDrainer(t, 50), forwardAlertsTo(url))
	decs := f.process(alert("a-1"), alert(evil), alert("a-3"))
	stuck, key := engine.OutboxID(decs[1].Position, 0), decs[1].Key.String()
	eventually(t, "the first alert is delivered", func() bool { return delivered() == "a-1" })

	b := openBrowser(t, chrome, f.http.URL)
	card := fmt.Sprintf(`document.querySelector('.stuck-fwd[data-id="%d"]')`, stuck)
	b.waitFor("the outbox panel", `!document.getElementById('outbox-panel').classList.contains('collapsed')`)
	b.waitFor("the entry the output waits at", card+` !== null && `+card+`.querySelector('.meta').textContent.includes('attempts')`)
	if got := b.eval(fmt.Sprintf(`[%[1]s.querySelector('strong').textContent, %[1]s.querySelector('.target').textContent,
		%[1]s.querySelector('.key').textContent].join('|')`, card)); got != fmt.Sprintf("#%d|%s|%s", stuck, url, key) {
		t.Fatalf("the stuck entry shows %q: want its id, target and key", got)
	}
	answer := b.eval(card + `.querySelector('.reason').textContent`)
	if !strings.Contains(answer, "503 Service Unavailable: dispatch cannot route <img src=x onerror=\"window.__xss=1\">\u27e8U+202E\u27e9b-2") {
		t.Fatalf("the stuck entry's answer %q: want the downstream's words, as text", answer)
	}
	if got := b.eval(card + `.querySelector('.remedy').textContent`); !strings.Contains(got, fmt.Sprintf("replayguard outbox hold %d --reason TEXT", stuck)) ||
		!strings.Contains(got, "entries behind it wait") {
		t.Fatalf("the stuck entry's remedy %q: want what to do, with the command", got)
	}
	if got := b.eval(`String(document.querySelectorAll('#outbox-panel img').length) + String(window.__xss)`); got != "0undefined" {
		t.Fatalf("a producer's markup in the downstream's answer was obeyed: %s", got)
	}
	b.shot("dashboard-outbox-stuck.png")

	if err := chromedp.Do(b.ctx, chromedp.SendKeys(chromedp.CSS(`#operator`), "duty officer")); err != nil {
		t.Fatal(err)
	}
	reason := "dispatch answers 503 to this alert alone"
	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`.stuck-fwd[data-id="%d"] button.hold`, stuck))),
		chromedp.WaitVisible(chromedp.CSS(`#hold-dialog[open]`)),
		chromedp.SendKeys(chromedp.CSS(`#hold-reason`), reason),
		chromedp.Click(chromedp.CSS(`#hold-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the hold's answer", `document.getElementById('toast').textContent.startsWith('Held #')`)
	eventually(t, "the alert behind the held one is delivered", func() bool { return delivered() == "a-1,a-3" })
	b.waitFor("the entry held, no longer waited at", card+` === null && document.querySelector('.held-fwd[data-id="`+fmt.Sprint(stuck)+`"]') !== null`)
	output := `document.querySelector('#outputs tr[data-output="webhook"]')`
	b.waitFor("the output's held column counting the operator's hold", output+`?.querySelector('td.n-held').textContent === '1' && `+
		`document.getElementById('outbox-summary').textContent.endsWith(' 1 held')`)
	held, err := f.store.OutboxHeld(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].ID != stuck || !strings.Contains(held[0].Reason, reason) {
		t.Fatalf("held entries %+v", held)
	}
	var holds []engine.AuditRecord
	f.store.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
		if r.Outcome == engine.OutcomeForwardHeld {
			holds = append(holds, r)
		}
		return nil
	})
	if len(holds) != 1 || holds[0].Ref != stuck || holds[0].Operator != "duty officer" {
		t.Fatalf("audit records of the hold: %+v", holds)
	}
	if got := b.eval(`String(document.querySelectorAll('img').length) + String(window.__xss)`); got != "0undefined" {
		t.Fatalf("a producer's markup was obeyed: %s", got)
	}
}
