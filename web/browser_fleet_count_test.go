package web

import (
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// TestADashboardOfAFleetCountsTheEntitiesThatAppear: the dashboard holds
// a part of a fleet's entities; a meter that appears while it is open is
// counted with the others, as a reload would count it.
func TestADashboardOfAFleetCountsTheEntitiesThatAppear(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "fleet-count-test"})
	const meters = 2100 // above the dashboard's 2,000
	var msgs []engine.Message
	for i := range meters {
		msgs = append(msgs, meterReading(fmt.Sprintf("m-%04d", i), fmt.Sprintf("r-%04d", i), "1"))
	}
	f.process(msgs...)

	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	b.waitFor("the entity count", `document.getElementById('entity-count').textContent === "· " + (2100).toLocaleString()`)
	f.process(meterReading("m-9999", "r-9999", "1")) // a new meter, past the part read
	b.waitFor("the new meter counted", `document.getElementById('entity-count').textContent === "· " + (2101).toLocaleString()`)
}
