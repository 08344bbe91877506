package app

import (
	"bytes"
	"errors"
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

// TestStateOfPatternsPrintsOnlyTheEntitiesTheyName: `state meter/m1*`
// reads a fleet's few meters, not all of them; a name with a pattern's
// characters in it is matched as itself; a malformed pattern is a usage
// error, and patterns that take nothing say so on stderr rather than
// print an empty state as if the store held none.
func TestStateOfPatternsPrintsOnlyTheEntitiesTheyName(t *testing.T) {
	tool := meterTool(t, t.TempDir(), "add: {kwh: kwh}")
	var feed strings.Builder
	for _, site := range []string{"m1", "m10", "m2", "m20", "x*y", "m3"} {
		fmt.Fprintf(&feed, `{"topic":"plant/%s/energy","payload":{"msgId":"a","kwh":1.5}}`+"\n", site)
	}
	ingest(t, tool, feed.String())
	state := func(asJSON bool, patterns ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		tool.Out, tool.Err = &out, &errOut
		err := tool.State(t.Context(), asJSON, patterns...)
		return out.String(), errOut.String(), err
	}
	names := func(out string) string {
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			got = append(got, strings.Fields(l)[0])
		}
		return strings.Join(got, " ")
	}
	for _, c := range []struct {
		patterns []string
		want     string
	}{
		{[]string{"meter/m1*"}, "meter/m1 meter/m10"},
		{[]string{"meter/m2", "meter/m3"}, "meter/m2 meter/m3"},
		{[]string{"meter/x*y"}, "meter/x*y"},
		{[]string{"meter/m?0"}, "meter/m10 meter/m20"},
		{nil, "meter/m1 meter/m10 meter/m2 meter/m20 meter/m3 meter/x*y"},
	} {
		out, errOut, err := state(false, c.patterns...)
		if err != nil || errOut != "" {
			t.Fatalf("state %q: %v %s", c.patterns, err, errOut)
		}
		if got := names(out); got != c.want {
			t.Errorf("state %q printed %s, want %s", c.patterns, got, c.want)
		}
	}
	if out, _, err := state(true, "meter/m1*"); err != nil || out != "{\n  \"meter/m1\": {\n    \"kwh\": 1.5\n  },\n  \"meter/m10\": {\n    \"kwh\": 1.5\n  }\n}\n" {
		t.Fatalf("state --json meter/m1* = %q, %v", out, err)
	}
	out, errOut, err := state(true, "meter/q*")
	if err != nil || out != "{}\n" || !strings.Contains(errOut, "no entity matches meter/q*") {
		t.Fatalf("state --json of a pattern that takes nothing: %q, stderr %q, %v", out, errOut, err)
	}
	if _, _, err := state(false, "meter/[m"); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), `"meter/[m"`) {
		t.Fatalf("state of a malformed pattern: %v, want a usage error naming it", err)
	}
}
