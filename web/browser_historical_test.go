package web

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// TestAHistoricalValueIsMarkedInALineage: a Sparkplug NDATA whose only
// Temperature is flagged is_historical (an edge forwarding what it stored
// during an outage) leaves the field at its current value; the entity's
// lineage shows that set with a "historical" mark saying the field stays,
// and the audit tail the decision's reason.
func TestAHistoricalValueIsMarkedInALineage(t *testing.T) {
	chrome := findChromium(t)
	f := newExplainingFixture(t, Config{Version: "historical-test"}, func(o *engine.Options) {
		o.Routes = append(slices.Clone(o.Routes), engine.Route{Name: "plant", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#",
			Effects: []engine.EffectSpec{{Entity: "meter/{topic[3]}", Set: map[string]string{"temp": "metrics.Temperature"}}}})
		o.Kinds = append(o.Kinds, sparkplug.RouteKind{})
	})
	edge := sparkplug.NewEdge("plant", "m1", 0)
	temp := func(v int64) []sparkplug.Metric {
		return []sparkplug.Metric{{Name: "Temperature", Datatype: sparkplug.Int32, Value: v}}
	}
	now := time.Now()
	birth := edge.Birth(now, temp(20))
	current := edge.Data(now, temp(25))
	stored := edge.Data(now, temp(18))
	var p pb.Payload
	if err := proto.Unmarshal(stored.Payload, &p); err != nil {
		t.Fatal(err)
	}
	p.Metrics[0].IsHistorical = proto.Bool(true)
	payload, err := proto.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	decs := f.process(engine.Message{Topic: birth.Topic, Payload: birth.Payload},
		engine.Message{Topic: current.Topic, Payload: current.Payload}, engine.Message{Topic: stored.Topic, Payload: payload})
	for i, d := range decs {
		if d.Outcome != engine.Applied {
			t.Fatalf("message %d: %s (%s), want applied", i, d.Outcome, d.Reason)
		}
	}

	b := openBrowser(t, chrome, f.http.URL)
	b.eval(`openLineage("meter/m1"), ""`)
	b.waitFor("meter m1's lineage", `document.querySelectorAll('#lineage tr.change').length === 3`)
	rows := b.eval(`[...document.querySelectorAll('#lineage tr.change')].map(tr =>
		[...tr.querySelectorAll('.effect span')].map(c => c.textContent).join(' ')).join(' | ')`)
	if want := "temp set 20 → 20 | temp set 25 → 25 | temp set 18 → 25 historical"; rows != want {
		t.Fatalf("meter m1's changes on screen: %q, want %q", rows, want)
	}
	if got, want := b.eval(`document.querySelector('#lineage .effect .historical').title`),
		"a historical value, not the current one: the field stays 25"; got != want {
		t.Fatalf("the mark's title %q, want %q", got, want)
	}
	if got := b.eval(`document.querySelector('.lineage-state dd').textContent`); got != "25" {
		t.Fatalf("state on screen: temp %q, want 25", got)
	}
	// The audit tail, under the lineage, gives the decision's reason.
	b.waitFor("the audit tail", `document.querySelectorAll('#audit tbody tr').length === 3`)
	if got, want := b.eval(`[...document.querySelectorAll('#audit tbody tr')].map(tr => tr.lastElementChild.textContent).join(' | ')`),
		"set temp: a historical value of metrics.Temperature not set, none current: the field is left as it was |  | "; got != want {
		t.Fatalf("the audit tail's reasons: %q, want %q", got, want)
	}
	b.shot("dashboard-lineage-historical.png")
}
