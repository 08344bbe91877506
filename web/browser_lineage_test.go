package web

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/replayguard/replayguard/engine"
)

// TestLineageInABrowser: clicking an entity card opens its lineage, each
// change with what it did to the fields and the replays suppressed under
// the change they repeat; it follows the feed while open, and says why
// when there is none.
func TestLineageInABrowser(t *testing.T) {
	chrome := findChromium(t)
	f := newExplainingFixture(t, Config{Version: "lineage-test"})

	replay := cop("fire", "e7", 2, "7", 1, "e7", "on_scene")
	replay.Dup, replay.Broker = true, "tcp://broker-b:1883"
	decs := f.process(cop("fire", "e7", 1, "7", 2, "e7", "enroute"), cop("fire", "e7", 2, "7", 1, "e7", "on_scene"),
		cop("police", "p1", 1, "12", 0, "p1", "on_patrol"))
	second := decs[1].Position
	decs = f.process(replay, cop("ems", "m2", 1, "7", 1, "m2", "on_scene"))
	if decs[0].Outcome != engine.Duplicate {
		t.Fatalf("the replay was %s, want duplicate", decs[0].Outcome)
	}
	suppressed := decs[0].Position
	// e9's seq 1 comes late: applied, but its status is older than seq 2's.
	f.process(cop("fire", "e9", 2, "8", 0, "e9", "on_scene"))
	f.process(cop("fire", "e9", 1, "8", 0, "e9", "enroute"))
	conflict := f.process(cop("fire", "e7", 2, "7", 5, "e7", "on_scene"))[0] // seq 2 again, other content: held
	if conflict.Outcome != engine.Conflict {
		t.Fatalf("the changed seq 2 was %s, want conflict", conflict.Outcome)
	}

	b := openBrowser(t, chrome, f.http.URL)
	waitFor, eval := b.waitFor, b.eval
	waitFor("the entities", `document.querySelector('.entity[data-name="incident/7"]') !== null`)
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`.entity[data-name="incident/7"]`))); err != nil {
		t.Fatal(err)
	}
	waitFor("the lineage", `document.querySelector('#lineage[open]') !== null && document.querySelectorAll('#lineage tr.change').length === 3`)

	if got := eval(`document.getElementById('lineage-name').textContent`); got != "incident/7" {
		t.Fatalf("lineage of %q, want incident/7", got)
	}
	effects := eval(`[...document.querySelectorAll('#lineage tr.change td.effects')].map(td =>
		[...td.querySelectorAll('.effect')].map(e => [...e.children].map(c => c.textContent).join(' ')).join('; ')).join(' | ')`)
	if effects != "casualties add 2 → 2 | casualties add 1 → 3 | casualties add 1 → 4" {
		t.Fatalf("effects on screen: %q", effects)
	}
	if got := eval(`[...document.querySelectorAll('#lineage tr.change')].map(tr => tr.children[3].textContent + ' ' + tr.children[5].textContent).join(', ')`); got !=
		"fire/e7 1, fire/e7 2, ems/m2 1" {
		t.Fatalf("sources and sequences on screen: %q", got)
	}
	// The replay sits in the row right under the change it repeats, with
	// its broker and DUP flag; the conflicting seq 2 is held there too.
	under := fmt.Sprintf(`document.querySelector('#lineage tr.change[data-position="%d"]').nextElementSibling`, second)
	if got := eval(under + `.className + ': ' + [...` + under + `.querySelectorAll('.other')].map(o => [...o.children].map(c => c.textContent).join(' ')).join(' / ')`); !strings.HasPrefix(got,
		fmt.Sprintf("others: suppressed #%d ", suppressed)) || !strings.Contains(got, "broker tcp://broker-b:1883 DUP") ||
		!strings.Contains(got, fmt.Sprintf("conflict #%d ", conflict.Position)) {
		t.Fatalf("under the change #%d: %q", second, got)
	}
	if got := eval(`String(document.querySelectorAll('#lineage tr.others .suppressed').length)`); got != "1" {
		t.Fatalf("%s suppressed replays on screen, want 1", got)
	}
	if got := eval(`[...document.querySelectorAll('.lineage-state dt, .lineage-state dd')].map(e => e.textContent).join(' ')`); got != "casualties 4" {
		t.Fatalf("state on screen %q", got)
	}
	b.shot("dashboard-lineage.png")

	// While it is open, a new change to the entity shows up.
	f.process(cop("ems", "m2", 2, "7", 2, "m2", "on_scene"))
	waitFor("the new change", `document.querySelectorAll('#lineage tr.change').length === 4 &&
		document.querySelector('.lineage-state dd').textContent === '6'`)

	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(`#lineage-close`))); err != nil {
		t.Fatal(err)
	}
	waitFor("the lineage to close", `document.querySelector('#lineage[open]') === null`)

	// An entity no decision changed: the 404's words in the panel.
	eval(`openLineage("incident/99"), ""`)
	waitFor("the reason there is no lineage", `document.querySelector('#lineage[open] .banner')?.textContent.includes('no decision changed entity "incident/99"') === true`)
	if got := eval(`document.getElementById('lineage-name').textContent`); got != "incident/99" {
		t.Fatalf("lineage of %q, want incident/99", got)
	}

	// A set older than the field's value is marked lost.
	eval(`openLineage("unit/e9"), ""`)
	waitFor("unit e9's lineage", `document.querySelectorAll('#lineage tr.change').length === 2`)
	if got := eval(`[...document.querySelectorAll('#lineage tr.change')].map(tr => tr.children[6].textContent + ': ' +
		[...tr.querySelectorAll('.effect span')].map(c => c.textContent).join(' ')).join(' | ')`); got !=
		"applied: status set on_scene → on_scene | applied_late: status set enroute → on_scene lost" {
		t.Fatalf("unit e9's changes on screen: %q", got)
	}
	b.shot("dashboard-lineage-lost.png")
}
