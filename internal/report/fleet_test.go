package report_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// A fleet of meters is a source a meter: the page shows the sources with
// the most to review and sums the rest in one row, so that its table adds
// up to the totals, and the JSON report keeps every source.
func TestAFleetsPageShowsTheSourcesToReviewAndSumsTheRest(t *testing.T) {
	f := newFeed(t)
	fleet := report.MaxSourceRows + 500
	var msgs, replays []msgT
	for m := range fleet {
		id := fmt.Sprintf("m%05d", m)
		msgs = append(msgs, msgT{id, id + "-1", "0.25"})
		if m%100 == 7 { // replayed after a failover
			replays = append(replays, msgT{id, id + "-1", "0.25"})
		}
	}
	f.at(10*time.Second, meterReadings(msgs)...)
	f.at(70*time.Second, meterReadings(replays)...)
	f.at(80*time.Second, meter(standby, "m01234", "m01234-1", "0.5")) // a conflict
	rep := f.build(t, report.Options{})
	if len(rep.Sources) != fleet {
		t.Fatalf("the report has %d sources, want every one of %d", len(rep.Sources), fleet)
	}
	var b bytes.Buffer
	if err := report.RenderHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkWellFormed(t, page)
	table := page[strings.Index(page, `<table id="sources">`):]
	table = table[:strings.Index(table, "</table>")]
	rows := regexp.MustCompile(`<tr data-route="meters" data-source="(m\d+)">`).FindAllStringSubmatch(table, -1)
	if len(rows) != report.MaxSourceRows {
		t.Fatalf("the table has a row for %d sources, want %d", len(rows), report.MaxSourceRows)
	}
	if rows[0][1] != "m01234" {
		t.Errorf("the first row is %s, want the meter with the conflict, m01234", rows[0][1])
	}
	shown := map[string]bool{}
	for _, r := range rows {
		shown[r[1]] = true
	}
	for _, r := range replays {
		if !shown[r.id] {
			t.Errorf("the replayed meter %s has no row", r.id)
		}
	}
	left := fleet - report.MaxSourceRows
	rest := regexp.MustCompile(`<tr class="rest"><td colspan="2">the other (\d+) sources</td><td class="n">(\d+)</td><td class="n">0</td><td class="n">0</td>`).FindStringSubmatch(table)
	if rest == nil || rest[1] != fmt.Sprint(left) || rest[2] != fmt.Sprint(left) {
		t.Errorf("the table's last row does not sum the other %d sources' %d applied: %v", left, left, rest)
	}
	if !strings.Contains(page, fmt.Sprintf("%d sources: the %d with the most to review", fleet, report.MaxSourceRows)) {
		t.Error("the page does not say the table leaves sources out")
	}
}

// msgT is a meter reading: meter, msgId, kwh.
type msgT struct{ id, msgID, kwh string }

// meterReadings are ms as the primary broker delivers them.
func meterReadings(ms []msgT) []engine.Message {
	var out []engine.Message
	for _, m := range ms {
		out = append(out, meter(primary, m.id, m.msgID, m.kwh))
	}
	return out
}
