package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/store/memory"
)

// A conflict is a delivery like a replay: its line in a lineage names the
// broker and the feed that brought it, so that a reviewer of two broker
// paths sees which path carried the other content, in explain's text and
// in the report alike.
func TestAConflictInALineageNamesThePathThatBroughtIt(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	e := meterEngine(t, st)
	fromA := engine.Message{Topic: "plant/m1/energy", Broker: "tcp://site-a-1:1883", Feed: "a", Payload: []byte(`{"msgId":"r1","kwh":1.5}`)}
	fromB := engine.Message{Topic: "plant/m1/energy", Broker: "tcp://site-b-1:1883", Feed: "b", Dup: true, Payload: []byte(`{"msgId":"r1","kwh":2.5}`)}
	for _, m := range []engine.Message{fromA, fromB} {
		if _, err := e.Process(ctx, []engine.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := report.Lineages(report.Records(ctx, st, nil), report.LineageOptions{Entities: []string{"meter/m1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls[0].Changes) != 1 || len(ls[0].Changes[0].Held) != 1 {
		t.Fatalf("lineage %+v, want one change with one conflict held", ls[0])
	}
	var text bytes.Buffer
	if err := WriteLineage(&text, ls[0]); err != nil {
		t.Fatal(err)
	}
	var conflict string
	for line := range strings.Lines(text.String()) {
		if strings.Contains(line, "conflict #2") {
			conflict = line
		}
	}
	if !strings.Contains(conflict, "broker tcp://site-b-1:1883  feed b  DUP") {
		t.Errorf("explain's conflict line %q does not name the broker, feed and DUP flag of its delivery:\n%s", conflict, text.String())
	}
	rep, err := report.Build(report.Records(ctx, st, nil), report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep.Lineages = ls
	var page bytes.Buffer
	if err := report.RenderHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	if want := " · tcp://site-b-1:1883 · feed b · DUP · key already applied with different content</div>"; !strings.Contains(page.String(), want) {
		t.Errorf("the report's conflict line does not name the broker, feed and DUP flag of its delivery (%q)", want)
	}
}
