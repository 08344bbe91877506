package web

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/engine"
)

func TestDashboardChartsInABrowser(t *testing.T) {
	chrome := findChromium(t)
	// The engine's clock: a set time while the history is fed, the real
	// time after (0).
	var at atomic.Int64
	f := newFixture(t, Config{Version: "charts-test"}, func(o *engine.Options) {
		o.Now = func() time.Time {
			if n := at.Load(); n != 0 {
				return time.Unix(0, n)
			}
			return time.Now()
		}
	})

	// A minute of history, 90 to 31 seconds ago: 300 county sensors, five
	// a second, each sending sequences 1 and 2; s-123 also sends 5, so 3–4
	// are missing.
	const sensors = 300
	sensor := func(i int, seq int64) engine.Message {
		return cop("county", fmt.Sprintf("s-%03d", i), seq, "40", 0, fmt.Sprintf("s-%03d", i), "ok")
	}
	t0 := time.Now().Truncate(time.Second).Add(-90 * time.Second)
	for k := range sensors / 5 {
		at.Store(t0.Add(time.Duration(k) * time.Second).UnixNano())
		var msgs []engine.Message
		for i := 5 * k; i < 5*k+5; i++ {
			msgs = append(msgs, sensor(i, 1), sensor(i, 2))
			if i == 123 {
				msgs = append(msgs, sensor(i, 5))
			}
		}
		f.process(msgs...)
	}
	at.Store(0)

	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	b.waitFor("a minute of applied decisions on the chart",
		`document.querySelectorAll('#rates-chart g.series[data-outcome="applied"] rect').length === 60`)

	// Source health: every sensor a square, the one with a gap red and
	// listed first with its gap; the rest of the table is capped.
	b.waitFor("every source on the map", fmt.Sprintf(`document.querySelectorAll('#source-map rect.cell').length === %d`, sensors))
	if got := b.eval(`[...document.querySelectorAll('#source-map rect.cell.gap')].map(r => r.dataset.source).join(',')`); got != "incidents county/s-123" {
		t.Fatalf("sources marked with a gap on the map: %q", got)
	}
	if got := b.eval(`(() => { const r = document.querySelector('#sources tbody tr'); return r.className + ' ' + r.dataset.source + ' ' + r.querySelector('td.gap')?.textContent; })()`); got != "gappy incidents county/s-123 3–4" {
		t.Fatalf("first source row %q, want the gappy s-123 with 3–4", got)
	}
	if got := b.eval(`document.getElementById('source-summary').textContent`); got != "· 300 sources · 1 with open gaps" {
		t.Fatalf("source summary %q", got)
	}
	if got := b.eval(`String(document.querySelectorAll('#sources tbody tr[data-source]').length) + ' ' + document.querySelector('#sources tbody td.empty')?.textContent`); got != "81 + 219 more without gaps (each a square above)" {
		t.Fatalf("source table %q: want the gappy row, 80 others and a note", got)
	}
	if got := b.eval(`document.getElementById('c-gaps').textContent`); got != "2" {
		t.Fatalf("sequences missing %q, want 2", got)
	}

	// A failover replays a hundred messages at once: a spike of duplicates,
	// live, ten times the baseline of ten a second.
	b.eval(`window.__sameDocument = "yes"`)
	var replay []engine.Message
	for i := range 50 {
		replay = append(replay, sensor(i, 1), sensor(i, 2))
	}
	f.process(replay...)
	spike := func(when string) {
		t.Helper()
		b.waitFor("the replay burst "+when, `(() => { const g = document.querySelector('#rates-chart g.series[data-outcome="duplicate"]');
			return g !== null && g.dataset.total === '100' && g.querySelector('rect[data-n="100"]') !== null; })()`)
		if got := b.eval(`[...document.querySelectorAll('#rates-chart g.series')].map(g => g.dataset.outcome).join(' ')`); got != "applied duplicate" {
			t.Fatalf("series %q %s, want applied and duplicate", got, when)
		}
		// Drawn heights: the duplicate bar against the tallest stack of any
		// other second.
		heights := b.eval(`(() => {
			const dup = document.querySelector('#rates-chart g.series[data-outcome="duplicate"] rect[data-n="100"]');
			const stacks = {};
			for (const r of document.querySelectorAll('#rates-chart g.series rect')) {
				if (r.dataset.sec !== dup.dataset.sec) stacks[r.dataset.sec] = (stacks[r.dataset.sec] || 0) + r.getBBox().height;
			}
			return dup.getBBox().height + ' ' + Math.max(...Object.values(stacks)); })()`)
		var dup, base float64
		if _, err := fmt.Sscan(heights, &dup, &base); err != nil || base <= 0 || dup < 5*base {
			t.Fatalf("duplicate bar and tallest other second %s px %s: want the spike over five times the baseline", heights, when)
		}
		if got := b.eval(`document.querySelector('#rates-legend .key.duplicate').className`); got != "key duplicate" {
			t.Fatalf("legend duplicate key %q %s", got, when)
		}
	}
	spike("live")
	if got := b.eval(`window.__sameDocument || "reloaded"`); got != "yes" {
		t.Fatalf("the page reloaded (%s) before the burst showed", got)
	}
	b.shot("dashboard-charts-live.png")

	// A reload draws the same history from /api/v1/rates.
	if err := chromedp.Do(b.ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the reloaded page", `window.__sameDocument === undefined && document.querySelector('#live.up') !== null`)
	spike("after a reload")
	if got := b.eval(`String(document.querySelectorAll('#rates-chart g.series[data-outcome="applied"] rect').length)`); got != strconv.Itoa(60) {
		t.Fatalf("%s seconds of applied decisions after a reload, want 60", got)
	}
	b.shot("dashboard-charts-reloaded.png")
}

// TestADashboardOfAFleet: a fleet holds more sources and entities than the
// dashboard asks for. It shows the part it read, the sources with open
// gaps among them whatever their names, and counts every source,
// entity and missing sequence.
func TestADashboardOfAFleet(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "fleet-test"})
	const sensors = 2100 // above the dashboard's 2,000
	var msgs []engine.Message
	for i := range sensors {
		id := fmt.Sprintf("s-%04d", i)
		msgs = append(msgs, cop("county", id, 1, "40", 0, id, "ok"), cop("county", id, 2, "40", 0, id, "ok"))
		if i == sensors-1 { // the last by name: 3..4 missing
			msgs = append(msgs, cop("county", id, 5, "40", 0, id, "ok"))
		}
	}
	f.process(msgs...)

	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	b.waitFor("the sources read on the map", `document.querySelectorAll('#source-map rect.cell').length === 2000`)
	if got := b.eval(`[...document.querySelectorAll('#source-map rect.cell.gap')].map(r => r.dataset.source).join(',')`); got != "incidents county/s-2099" {
		t.Fatalf("sources marked with a gap on the map: %q, want the last by name", got)
	}
	want := b.eval(`"· " + (2100).toLocaleString() + " sources (" + (2000).toLocaleString() + " shown) · 1 with open gaps"`)
	if got := b.eval(`document.getElementById('source-summary').textContent`); got != want {
		t.Fatalf("source summary %q, want %q", got, want)
	}
	if got := b.eval(`document.getElementById('c-gaps').textContent`); got != "2" {
		t.Fatalf("sequences missing %q, want 2", got)
	}
	want = b.eval(`"· " + (2101).toLocaleString()`) // the sensors' units and incident 40
	if got := b.eval(`document.getElementById('entity-count').textContent`); got != want {
		t.Fatalf("entity count %q, want %q", got, want)
	}
	if got := b.eval(`String(document.querySelectorAll('#entities .entity').length)`); got != "240" {
		t.Fatalf("%s entity cards, want 240", got)
	}

	// A sensor that appears while the dashboard is open, its unit past the
	// part read, is counted with the others, as a reload would count it.
	f.process(cop("county", "s-9999", 1, "40", 0, "s-9999", "ok"))
	b.waitFor("the new unit counted", `document.getElementById('entity-count').textContent === "· " + (2102).toLocaleString()`)
}
