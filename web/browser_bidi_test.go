package web

import (
	"strings"
	"testing"
)

// TestABidiOverrideInAProducersStringIsShownNotObeyed: a right-to-left
// override in a producer's field would make the card of incident
// "\u202e21" read "12", the name of another incident, and an isolate
// reorder a field's value. The dashboard writes such a control as its code
// point: on the cards, their fields and the lineage's title.
func TestABidiOverrideInAProducersStringIsShownNotObeyed(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "bidi-test"})
	f.process(incident(1, "12", 1, "on_scene"), incident(2, "\u202e21", 5, "\u2067enroute"))

	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	b.waitFor("the entities", `document.querySelectorAll('.entity').length === 3`)
	if got := b.eval(`[...document.querySelectorAll('.entity .name')].map(n => n.textContent).join(' ')`); got != "12 ⟨U+202E⟩21 e7" {
		t.Fatalf("entity names on the cards: %q", got)
	}
	if got := b.eval(`document.querySelector('.entity[data-name="unit/e7"] dd').textContent`); got != "⟨U+2067⟩enroute" {
		t.Fatalf("unit e7's status on its card: %q", got)
	}
	b.eval(`(() => { document.querySelector('.entity[data-name="incident/\u202e21"]').click(); return ""; })()`)
	b.waitFor("the lineage", `document.getElementById('lineage').open`)
	if got := b.eval(`document.getElementById('lineage-name').textContent`); got != "incident/⟨U+202E⟩21" {
		t.Fatalf("lineage of %q", got)
	}
	if got := b.eval(`document.body.innerText + document.getElementById('lineage').innerText`); strings.ContainsAny(got, "\u202e\u2067") {
		t.Fatalf("the page shows a bidirectional control as is: %q", got[:min(len(got), 200)])
	}
}
