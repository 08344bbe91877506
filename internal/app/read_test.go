package app

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// TestStateAndSourcesPrintTheStoreAsItsSnapshotDoes: `state` and `sources`
// read a store row by row (a fleet's would not fit in memory as one
// snapshot), and print what the whole snapshot printed, in the same order:
// JSON byte for byte, the table's cells line by line (the table is aligned
// a block of lines at a time). More entities than a block; names and
// values JSON escapes.
func TestStateAndSourcesPrintTheStoreAsItsSnapshotDoes(t *testing.T) {
	tool := meterTool(t, t.TempDir(), "add: {kwh: kwh}\nset: {note: note}")
	print := func(f func() error) string {
		var out bytes.Buffer
		tool.Out = &out
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	state := func(asJSON bool) string { return print(func() error { return tool.State(t.Context(), asJSON) }) }
	sources := func(asJSON bool) string { return print(func() error { return tool.Sources(t.Context(), asJSON) }) }
	ingest(t, tool, "")
	if got := state(true); got != "{}\n" {
		t.Fatalf("state --json of an empty store = %q", got)
	}
	if got := sources(true); got != "[]\n" {
		t.Fatalf("sources --json of an empty store = %q", got)
	}

	var feed strings.Builder
	for i := range stateBlock + 900 {
		site := fmt.Sprintf("m%05d", i)
		if i%1000 == 7 {
			site = fmt.Sprintf("<é&%d>", i)
		}
		fmt.Fprintf(&feed, `{"topic":"plant/%s/energy","payload":{"msgId":"a","kwh":%d.25,"note":"<b>&\"%d"}}`+"\n", site, i%7, i)
	}
	ingest(t, tool, feed.String())
	a, err := tool.openRead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := a.Snapshot(t.Context())
	a.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Entities) != stateBlock+900 {
		t.Fatalf("%d entities stored", len(snap.Entities))
	}
	want := func(f func(*Tool) error) string {
		var out bytes.Buffer
		if err := f(&Tool{Out: &out}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	wantState := func(asJSON bool) string {
		return want(func(w *Tool) error { return w.printState(engine.StateJSON(snap.Entities), asJSON) })
	}
	if got, want := state(true), wantState(true); got != want {
		t.Fatalf("state --json differs from the snapshot's:\n%.300s\nwant\n%.300s", got, want)
	}
	if got, want := cells(state(false)), cells(wantState(false)); got != want {
		t.Fatalf("state differs from the snapshot's:\n%.300s\nwant\n%.300s", got, want)
	}
	for _, asJSON := range []bool{true, false} {
		got := sources(asJSON)
		want := want(func(w *Tool) error { return w.printSources(engine.SourceReports(snap.Sources), asJSON) })
		if got != want {
			t.Fatalf("sources (json %v) differs from the snapshot's:\n%.300s\nwant\n%.300s", asJSON, got, want)
		}
	}
}

// cells is a table's text with the runs of spaces that align it made one.
func cells(table string) string {
	lines := strings.Split(table, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}
