package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/report"
)

func explainJSON(t *testing.T, args ...string) report.Lineage {
	t.Helper()
	var l report.Lineage
	out := mustRun(t, "", append([]string{"explain", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("explain --json: %v\n%.500s", err, out)
	}
	return l
}

// explain on the example capture: INC-0457's casualties are the sum of
// the adds it lists, the replays of its reports are listed beside them,
// and --field, --at and bad input behave.
func TestExplainTheExampleCapture(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, "", "ingest", "-c", cfg, "../../examples/incidents.jsonl")

	text := mustRun(t, "", "explain", "incident/INC-0457", "-c", cfg)
	for _, want := range []string{"incident/INC-0457: 5 changes, 3 replays suppressed", "casualties add 2 -> 2", "casualties add 1 -> 3",
		"suppressed #14", "conflict #22", "state: casualties 4 status \"under control\""} {
		if !strings.Contains(text, want) {
			t.Errorf("explain does not print %q:\n%s", want, text)
		}
	}

	l := explainJSON(t, "incident/INC-0457", "-c", cfg)
	sum, suppressed := 0, 0
	for _, c := range l.Changes {
		for _, e := range c.Effects {
			if e.Field == "casualties" {
				var v int
				if err := json.Unmarshal(e.Value, &v); err != nil {
					t.Fatal(err)
				}
				sum += v
			}
		}
		suppressed += len(c.Suppressed)
	}
	var state map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(mustRun(t, "", "state", "--json", "-c", cfg)), &state); err != nil {
		t.Fatal(err)
	}
	if got := string(state["incident/INC-0457"]["casualties"]); got != "4" || sum != 4 || suppressed != l.Suppressed || l.Suppressed != 3 {
		t.Errorf("state casualties %s, lineage adds %d, suppressed %d of %d", got, sum, suppressed, l.Suppressed)
	}

	status := explainJSON(t, "incident/INC-0457", "--field", "status", "-c", cfg)
	for _, c := range status.Changes {
		for _, e := range c.Effects {
			if e.Field != "status" {
				t.Errorf("--field status lists %s", e.Field)
			}
		}
	}
	if len(status.Changes) != 2 {
		t.Errorf("--field status: %d changes, want 2", len(status.Changes))
	}

	_, errs, code := cli(t, "", "explain", "incident/INC-0457", "--at", "2000-01-01T00:00:00Z", "-c", cfg)
	if code == 0 || !strings.Contains(errs, `no decision changed entity "incident/INC-0457" in the 0 audit records read up to 2000-01-01T00:00:00Z`) {
		t.Errorf("--at before the log: exit %d, %s", code, errs)
	}
	_, errs, code = cli(t, "", "explain", "incident/none", "-c", cfg)
	if code == 0 || !strings.Contains(errs, `no decision changed entity "incident/none" in the 29 audit records read`) {
		t.Errorf("an unknown entity: exit %d, %s", code, errs)
	}
	for _, args := range [][]string{{"explain"}, {"explain", "a", "b"}, {"explain", "incident/INC-0457", "--at", "yesterday"}} {
		if _, errs, code := cli(t, "", append(args, "-c", cfg)...); code != exitUsage || errs == "" {
			t.Errorf("%v: exit %d, %s", args, code, errs)
		}
	}
	if _, errs, code := cli(t, "", "explain", "incident/INC-0457", "--archive", t.TempDir()+"/none", "-c", cfg); code == 0 || !strings.Contains(errs, "--archive") {
		t.Errorf("a missing --archive: exit %d, %s", code, errs)
	}
}

// report --entity adds the named entity's lineage section; the most
// replayed entities get theirs; a name no decision changed is an error.
func TestReportNamesEntities(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, "", "ingest", "-c", cfg, "../../examples/incidents.jsonl")
	rep := reportJSON(t, "-c", cfg, "--entity", "unit/M3")
	var names []string
	for _, l := range rep.Lineages {
		names = append(names, l.Entity)
	}
	if len(rep.Replayed) == 0 || rep.Replayed[0].Entity != "incident/INC-0457" || rep.Replayed[0].Suppressed != 3 {
		t.Errorf("replayed %+v", rep.Replayed)
	}
	if len(names) < 2 || names[0] != "unit/M3" || names[1] != "incident/INC-0457" {
		t.Errorf("lineage sections %v, want unit/M3 first, then the most replayed", names)
	}
	_, errs, code := cli(t, "", "report", "--entity", "unit/none", "-c", cfg)
	if code == 0 || !strings.Contains(errs, `--entity unit/none: no decision changed entity "unit/none"`) {
		t.Errorf("an unknown --entity: exit %d, %s", code, errs)
	}
	// A period that ends before the last change: the section stops there.
	first := rep.Lineages[1].Changes[0].Time
	rep = reportJSON(t, "-c", cfg, "--entity", "incident/INC-0457", "--to", first.Add(time.Nanosecond).Format(time.RFC3339Nano))
	if len(rep.Lineages[0].Changes) == 0 {
		t.Fatal("--to just after the first change: no change")
	}
	for _, c := range rep.Lineages[0].Changes {
		if c.Time.After(first) {
			t.Errorf("--to just after the first change lists one at %s", c.Time)
		}
	}
}

// The state captured between two ingests is what explain --at that moment
// prints, for every entity; an exported record whose effects were altered
// fails audit verify.
func TestExplainAtAMomentAndAlteredEffects(t *testing.T) {
	cfg := testConfig(t, "")
	lines, err := os.ReadFile("../../examples/meters.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.SplitAfter(strings.TrimSpace(string(lines)), "\n")
	half := len(all) / 2
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.jsonl"), filepath.Join(dir, "second.jsonl")
	os.WriteFile(first, []byte(strings.Join(all[:half], "")), 0o644)
	os.WriteFile(second, []byte(strings.Join(all[half:], "")), 0o644)
	mustRun(t, "", "ingest", "-c", cfg, first)
	var mid map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(mustRun(t, "", "state", "--json", "-c", cfg)), &mid); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	time.Sleep(10 * time.Millisecond)
	mustRun(t, "", "ingest", "-c", cfg, second)
	var final map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(mustRun(t, "", "state", "--json", "-c", cfg)), &final); err != nil {
		t.Fatal(err)
	}
	changed := 0
	for entity := range final {
		if mid[entity] == nil {
			continue // not there yet: nothing changed it before at
		}
		l := explainJSON(t, entity, "--at", at.Format(time.RFC3339Nano), "-c", cfg)
		if b, _ := json.Marshal(l.State); string(b) != mustJSON(t, mid[entity]) {
			t.Errorf("%s: explain --at %s says %s; state then was %s", entity, at, b, mustJSON(t, mid[entity]))
		}
		if mustJSON(t, mid[entity]) != mustJSON(t, final[entity]) {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("no entity changed after the first half: the test proves nothing")
	}

	export := filepath.Join(dir, "audit.jsonl")
	os.WriteFile(export, []byte(mustRun(t, "", "audit", "export", "-c", cfg)), 0o644)
	mustRun(t, "", "audit", "verify", "--file", export, "-c", cfg)
	b, _ := os.ReadFile(export)
	altered := strings.Replace(string(b), `"op":"add","value":0.25`, `"op":"add","value":0.5`, 1)
	if altered == string(b) {
		t.Fatal("the export has no add of 0.25 to alter")
	}
	os.WriteFile(export, []byte(altered), 0o644)
	if _, errs, code := cli(t, "", "audit", "verify", "--file", export, "-c", cfg); code == 0 || !strings.Contains(errs, "position") {
		t.Errorf("an export with an altered effect: exit %d, %s", code, errs)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An entity named twice gets one section.
func TestReportNamesAnEntityOnce(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, "", "ingest", "-c", cfg, "../../examples/incidents.jsonl")
	rep := reportJSON(t, "-c", cfg, "--entity", "unit/M3,unit/M3", "--entity", "unit/M3")
	n := 0
	for _, l := range rep.Lineages {
		if l.Entity == "unit/M3" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("unit/M3 has %d sections", n)
	}
}
