package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/report"
)

// explainPath is the dashboard's (lineage.js): the name escaped whole,
// its slashes too.
func explainPath(name string) string {
	return "/api/v1/explain/" + strings.ReplaceAll(url.QueryEscape(name), "+", "%20")
}

// Entity names come from producers' payloads and topic levels: an empty
// level, a dot segment, unicode, URL metacharacters. GET
// /api/v1/explain/{entity}, asked as the dashboard asks it, answers that
// entity's lineage, never another entity's or none.
func TestExplainServesEntitiesWithOddNames(t *testing.T) {
	f := newExplainingFixture(t, Config{})
	ids := []string{"Zürich ✓", "a?b#c", "50%", "", "x/", "a//b", "..", "../7", "a/./b"}
	for i, id := range ids {
		f.process(incident(int64(i+1), id, i+1, "enroute"))
	}
	f.process(incident(int64(len(ids)+1), "7", 100, "enroute"))
	for i, id := range ids {
		name := "incident/" + id
		t.Run(name, func(t *testing.T) {
			r := f.get(explainPath(name))
			if r.code != http.StatusOK {
				t.Fatalf("GET %s: status %d, %s", explainPath(name), r.code, r.body)
			}
			var l report.Lineage
			r.want(t, http.StatusOK, &l)
			if l.Entity != name || len(l.Changes) != 1 || string(l.State["casualties"]) != string(rune('0'+i+1)) {
				t.Fatalf("GET %s: lineage of %q, %d changes, casualties %s; want %q's, casualties %d", explainPath(name), l.Entity, len(l.Changes), l.State["casualties"], name, i+1)
			}
		})
	}
}

// The dashboard opens the lineage of an entity whose name has an empty
// level or a dot segment (producer-controlled: an incident_id "z/../7"):
// the panel shows that entity's changes, not another entity's (the
// browser and the server both clean such a path) nor a 404.
func TestLineageOfOddNamesInABrowser(t *testing.T) {
	chrome := findChromium(t)
	f := newExplainingFixture(t, Config{Version: "lineage-odd-names"})
	f.process(cop("fire", "e7", 1, "7", 100, "e7", "enroute"), cop("fire", "e7", 2, "z/../7", 1, "e7", "enroute"),
		cop("fire", "e7", 3, "a//b", 2, "e7", "enroute"), cop("fire", "e7", 4, "Zürich ?#%", 3, "e7", "enroute"))
	b := openBrowser(t, chrome, f.http.URL)
	for name, want := range map[string]string{"incident/z/../7": "casualties 1", "incident/a//b": "casualties 2", "incident/Zürich ?#%": "casualties 3"} {
		b.eval(`document.querySelector('#lineage[open]')?.close(), ""`)
		b.eval(fmt.Sprintf(`lineage.data = null, openLineage(%q), ""`, name))
		b.waitFor(name+"'s lineage or its error", `document.querySelector('#lineage[open] .banner') !== null || document.querySelectorAll('#lineage tr.change').length > 0`)
		got := b.eval(`(document.querySelector('#lineage[open] .banner')?.textContent || '') + [...document.querySelectorAll('.lineage-state dt, .lineage-state dd')].map(e => e.textContent).join(' ')`)
		if got != want {
			t.Errorf("the lineage panel of %q shows %q, want %q", name, got, want)
		}
	}
}
