package report_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/internal/report"
)

// TestReportInABrowser renders the story's report in headless Chromium:
// the timeline has a bar for every outcome the story decided and the
// quarantine table a row for every held message. The screenshot goes to
// $REPLAYGUARD_ARTIFACTS.
func TestReportInABrowser(t *testing.T) {
	chrome := ""
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		if os.Getenv("REPLAYGUARD_REQUIRE_SERVICES") == "1" {
			t.Fatal("chromium is not installed (apt-get install chromium) and REPLAYGUARD_REQUIRE_SERVICES=1")
		}
		t.Skip("chromium is not installed; apt-get install chromium to run the report test")
	}
	rep := story(t).build(t, report.Options{Store: "memory", ReadPath: "from the store", ConfigDigest: "0f3c"})
	page := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.RenderHTML(f, rep); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ctx, cancel := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(chrome),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	defer cancel()
	ctx, cancelTab := chromedp.NewContext(ctx, chromedp.WithErrorf(t.Logf))
	defer cancelTab()
	ctx, cancelRun := context.WithTimeout(ctx, 30*time.Second)
	defer cancelRun()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page)); err != nil {
		t.Fatalf("open the report: %v", err)
	}
	eval := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return s
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := t.TempDir()
	if d := os.Getenv("REPLAYGUARD_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	shot := filepath.Join(dir, "report.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)

	for _, o := range []string{"applied", "applied_late", "duplicate", "conflict", "quarantined", "malformed"} {
		// a bar drawn with a height the browser lays out
		got := eval(`String([...document.querySelectorAll('#timeline rect.bar[data-outcome="` + o + `"]')].filter(r => r.getBoundingClientRect().height > 0).length)`)
		if got == "0" {
			t.Errorf("no visible %s bar in the timeline", o)
		}
	}
	if got := eval(`String(document.querySelectorAll('#timeline line.failover').length)`); got != "1" {
		t.Errorf("%s failover lines, want 1", got)
	}
	if got := eval(`[...document.querySelectorAll('#quarantine tr.held')].map(r => r.dataset.id + ':' + r.dataset.status).join(' ')`); got != "31:released 32:released 33:discarded" {
		t.Errorf("quarantine rows %q", got)
	}
	if got := eval(`document.getElementById('verdict').textContent`); got != "intact" {
		t.Errorf("verdict %q", got)
	}
	if got := eval(`String(document.querySelector('#timeline').getBoundingClientRect().width > 900)`); got != "true" {
		t.Errorf("the timeline is not laid out across the page")
	}
}
