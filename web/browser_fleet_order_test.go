package web

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// TestADashboardOfAFleetShowsItsFirstEntitiesWithoutHoles: the server
// gives the dashboard the first 2,000 entities by name in byte order
// (meter/1, meter/10, meter/100, …, meter/9, meter/90, meter/900); the
// cards the dashboard shows are the first of those it has, in the order it
// shows them: no card of meter/100 while meter/91, which exists, is left
// out because the server's order put it past the part read.
func TestADashboardOfAFleetShowsItsFirstEntitiesWithoutHoles(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "fleet-order-test"})
	const meters = 2100 // above the dashboard's 2,000
	var msgs []engine.Message
	for i := 1; i <= meters; i++ {
		msgs = append(msgs, meterReading(strconv.Itoa(i), "m-"+strconv.Itoa(i), "1"))
	}
	f.process(msgs...)

	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	b.waitFor("the entities", `document.querySelectorAll('#entities .entity').length === 240`)
	shown := b.eval(`[...document.querySelectorAll('#entities .entity')].map(e => e.dataset.name).join(',')`)
	var numeric, server []string
	for i := 1; i <= meters; i++ {
		numeric = append(numeric, "meter/"+strconv.Itoa(i))
	}
	server = slices.Sorted(slices.Values(numeric))
	if shown != strings.Join(numeric[:240], ",") && shown != strings.Join(server[:240], ",") {
		t.Fatalf("the cards shown are not the first 240 entities in any order: %s", shown)
	}
}
