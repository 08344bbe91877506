package web

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/engine"
)

// findChromium returns the browser to drive, skipping the test when there is
// none unless REPLAYGUARD_REQUIRE_SERVICES=1.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("REPLAYGUARD_REQUIRE_SERVICES") == "1" {
		t.Fatal("chromium is not installed (apt-get install chromium) and REPLAYGUARD_REQUIRE_SERVICES=1")
	}
	t.Skip("chromium is not installed; apt-get install chromium to run the dashboard test")
	return ""
}

// cop is an incident-operations message from agency/source.
func cop(agency, source string, seq int64, incidentID string, casualties int, unit, status string) engine.Message {
	p := fmt.Sprintf(`{"agency":%q,"source_id":%q,"boot_id":1,"sequence":%d,"incident_id":%q,"casualty_delta":%d,"unit_id":%q,"unit_status":%q}`,
		agency, source, seq, incidentID, casualties, unit, status)
	return engine.Message{Topic: "incidents/" + agency + "/" + source, Payload: []byte(p)}
}

func meterReading(meterID, msgID, kwh string) engine.Message {
	return engine.Message{Topic: "plant/" + meterID + "/energy",
		Payload: []byte(fmt.Sprintf(`{"msgId":%q,"kwh":%s}`, msgID, kwh))}
}

func artifactDir(t *testing.T) string {
	if d := os.Getenv("REPLAYGUARD_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func TestDashboardInABrowser(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "dashboard-test"})

	// The picture before the browser opens: three agencies, two meters, a
	// replay, a gap and three held messages.
	f.process(cop("fire", "e7", 1, "7", 2, "e7", "enroute"), cop("fire", "e7", 2, "7", 0, "e7", "on_scene"),
		cop("ems", "m2", 1, "7", 1, "m2", "on_scene"), cop("police", "p1", 1, "12", 0, "p1", "on_patrol"),
		meterReading("meter-3", "m3-1", "0.25"), meterReading("meter-4", "m4-1", "1.5"))
	f.process(cop("fire", "e7", 2, "7", 0, "e7", "on_scene"), meterReading("meter-3", "m3-1", "0.25")) // replays
	f.process(cop("fire", "e7", 5, "7", 1, "e7", "on_scene"))                                          // 3..4 missing
	f.process(cop("police", "p1", 200, "12", 0, "p1", "on_scene"))
	held := f.process(
		cop("police", "p1", 90, "12", 2, "p1", "on_scene"), // 200-64 > 90: below the window
		meterReading("meter-3", "m3-1", "0.5"),             // same msgId, other reading
		engine.Message{Topic: "incidents/fire/e7", Payload: []byte("sequence=6 casualties=1")},
	)
	below, conflict := held[0].Position, held[1].Position

	b := openBrowser(t, chrome, f.http.URL)
	ctx, waitFor, eval, shot := b.ctx, b.waitFor, b.eval, b.shot
	field := func(entity, name string) string {
		return fmt.Sprintf(`(() => { const c = document.querySelector('.entity[data-name=%q]'); if (!c) return '';
			const dts = [...c.querySelectorAll('dt')]; const i = dts.findIndex(d => d.textContent === %q);
			return i < 0 ? '' : c.querySelectorAll('dd')[i].textContent; })()`, entity, name)
	}

	waitFor("the stream", `document.querySelector('#live.up') !== null`)
	waitFor("the entities", `document.querySelectorAll('.entity').length === 7`)
	waitFor("the held messages", fmt.Sprintf(`document.querySelectorAll('.held-msg').length === 3 && document.querySelector('.held-msg[data-id="%d"]') !== null`, below))
	waitFor("the gap", `document.querySelector('#sources tr.gappy td.gap')?.textContent === '3–4'`)
	waitFor("the outbox read", `outbox.status !== null && outbox.page !== null`)
	if got := eval(`document.getElementById('outbox-panel').className + ': ' + document.querySelector('#outbox-panel h2').textContent.trim()`); got !=
		"panel collapsed: Outbox — no forward effects" {
		t.Fatalf("outbox panel where no route forwards: %q", got)
	}
	eval(`window.__sameDocument = "yes"`)
	appliedBefore := eval(`document.getElementById('c-applied').textContent`)
	if appliedBefore != "8" {
		t.Fatalf("applied counter %q before the feed, want 8", appliedBefore)
	}
	if got := eval(field("incident/7", "casualties")); got != "4" {
		t.Fatalf("incident 7 casualties %q on screen, want 4", got)
	}
	if got := eval(`[...document.querySelectorAll('.entity')].map(e => e.dataset.name).join(' ')`); got !=
		"incident/7 incident/12 meter/meter-3 meter/meter-4 unit/e7 unit/m2 unit/p1" {
		t.Fatalf("entities in order %q", got)
	}
	if got := eval(fmt.Sprintf(`document.querySelector('.held-msg[data-id="%d"] pre').textContent`, held[2].Position)); got != "not JSON: sequence=6 casualties=1" {
		t.Fatalf("malformed payload shown as %q", got)
	}

	// A live feed: the counters and incident 7 change without a reload.
	fed := make(chan error, 1)
	go func() {
		defer close(fed)
		for i := range 20 {
			msgs := []engine.Message{cop("fire", "e7", int64(6+i), "7", 1, "e7", "on_scene"),
				meterReading("meter-4", fmt.Sprintf("m4-%d", i+2), "0.5")}
			f.metrics.Received(len(msgs))
			if _, err := f.eng.Process(context.Background(), msgs); err != nil {
				fed <- err
				return
			}
			time.Sleep(60 * time.Millisecond)
		}
	}()
	waitFor("the applied counter to move", fmt.Sprintf(`document.getElementById('c-applied').textContent !== %q`, appliedBefore))
	waitFor("incident 7 to change", field("incident/7", "casualties")+` !== '4'`)
	if err := <-fed; err != nil {
		t.Fatal(err)
	}
	waitFor("the feed's end on screen", field("incident/7", "casualties")+` === '24' && document.getElementById('c-applied').textContent === '48'`)
	shot("dashboard-live.png")

	// Release the below-window message: incident 12 gets its 2 casualties.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.held-msg[data-id="%d"] button.release`, below)))); err != nil {
		t.Fatal(err)
	}
	waitFor("the released message to leave the quarantine", fmt.Sprintf(`document.querySelector('.held-msg[data-id="%d"]') === null`, below))
	waitFor("incident 12 to show the released casualties", field("incident/12", "casualties")+` === '2'`)

	// Discard the conflicting reading, with a reason.
	reason := "meter-3 firmware resent m3-1 with a corrected value"
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`.held-msg[data-id="%d"] button.discard`, conflict))),
		chromedp.WaitVisible(chromedp.CSS(`#discard-dialog[open]`)),
		chromedp.SendKeys(chromedp.CSS(`#discard-reason`), reason),
		chromedp.Click(chromedp.CSS(`#discard-ok`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor("the discarded message to leave the quarantine", fmt.Sprintf(`document.querySelector('.held-msg[data-id="%d"]') === null`, conflict))
	waitFor("the discard in the audit tail", `[...document.querySelectorAll('#audit .badge')].some(b => b.textContent === 'discarded')`)
	if got := eval(`window.__sameDocument || "reloaded"`); got != "yes" {
		t.Fatalf("the page reloaded (%s)", got)
	}
	shot("dashboard-after-review.png")

	var discarded []engine.AuditRecord
	f.store.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
		if r.Outcome == engine.OutcomeDiscarded {
			discarded = append(discarded, r)
		}
		return nil
	})
	if len(discarded) != 1 || discarded[0].Reason != reason || discarded[0].Ref != conflict {
		t.Fatalf("discard audit records %+v", discarded)
	}
	if toast := eval(`document.getElementById('toast').textContent`); strings.Contains(toast, "failed") {
		t.Fatalf("the dashboard reported a failure: %s", toast)
	}
}

// browser is a headless Chromium tab on the dashboard.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// openBrowser opens url in a fresh headless Chromium; everything it does
// after that must finish within 45 seconds.
func openBrowser(t *testing.T, chrome, url string) *browser {
	t.Helper()
	ctx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1920, 1080),
	)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(ctx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelTab)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	ctx, cancelRun := context.WithTimeout(ctx, 45*time.Second)
	t.Cleanup(cancelRun)
	return &browser{t: t, ctx: ctx}
}

// waitFor polls the JavaScript predicate until it is true, failing the test
// with a screenshot after 10 seconds.
func (b *browser) waitFor(what, predicate string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		b.shot(b.t.Name() + "-failure.png")
		b.t.Fatalf("waiting for %s (%s): %v", what, predicate, err)
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// shot saves a screenshot of the page in the artifact directory.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(artifactDir(b.t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}
