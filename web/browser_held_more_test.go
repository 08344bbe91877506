package web

import (
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// TestTheQuarantinePanelSaysHowManyHeldItDoesNotShow: the dashboard reads
// the first 200 held messages, the oldest; when more are held, the panel
// says how many more there are, as the outbox panel does for its held
// entries, and counts the ones held after it was drawn.
func TestTheQuarantinePanelSaysHowManyHeldItDoesNotShow(t *testing.T) {
	chrome := findChromium(t)
	f := newFixture(t, Config{Version: "held-more-test"})
	junk := func(i int) engine.Message {
		return engine.Message{Topic: "plant/meter-3/energy", Payload: fmt.Appendf(nil, "reading %d", i)}
	}
	var msgs []engine.Message
	for i := range 205 {
		msgs = append(msgs, junk(i))
	}
	f.process(msgs...)

	b := openBrowser(t, chrome, f.http.URL)
	b.waitFor("the stream", `document.querySelector('#live.up') !== null`)
	b.waitFor("the held messages", `document.querySelectorAll('#quarantine .held-msg').length === 200`)
	more := `document.querySelector('#quarantine .more')?.textContent`
	b.waitFor("the count of those not shown", more+` === '+ 5 more held, newer (replayguard quarantine list)'`)

	f.process(junk(205))
	b.waitFor("the one held since", more+` === '+ 6 more held, newer (replayguard quarantine list)' && `+
		`document.getElementById('c-held').textContent === '206'`)
}
