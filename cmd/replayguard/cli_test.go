package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cli runs the command in-process and returns stdout, stderr and the exit code.
func cli(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// testConfig writes the example configuration with its store in a temp dir.
func testConfig(t *testing.T, extra string) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/replayguard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := strings.Replace(string(b), "./replayguard-data", filepath.Join(dir, "data"), 1)
	cfg = strings.Replace(cfg, "window: {ttl: 2h, max_entries: 1000000, sequence_span: 4096}", "window: {ttl: 2h, max_entries: 1000000, sequence_span: 64}", 1)
	path := filepath.Join(dir, "replayguard.yaml")
	if err := os.WriteFile(path, []byte(cfg+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errs, code := cli(t, stdin, args...)
	if code != 0 {
		t.Fatalf("replayguard %s: exit %d\n%s", strings.Join(args, " "), code, errs)
	}
	return out
}

func TestIngestTheExampleCapture(t *testing.T) {
	cfg := testConfig(t, "")
	out := mustRun(t, "", "ingest", "--config", cfg, "../../examples/incidents.jsonl")
	if want := "applied=16 applied_late=1 duplicate=8 conflict=1 quarantined=0 malformed=3 total=29\n"; out != want {
		t.Fatalf("summary %q, want %q", out, want)
	}
	mustRun(t, "", "ingest", "-c", cfg, "../../examples/meters.jsonl")
	var state map[string]map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "", "state", "--json", "-c", cfg)), &state); err != nil {
		t.Fatal(err)
	}
	checks := map[string]string{
		"incident/INC-0457.casualties": "4", "unit/E7.status": "available", "unit/P12.status": "available",
		"incident/INC-0458.casualties": "2", "meter/meter-3.kwh": "1.75", "meter/meter-4.kwh": "0.4",
	}
	for k, want := range checks {
		ent, fld, _ := strings.Cut(k, ".")
		if got := fmt.Sprint(state[ent][fld]); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	var sources []struct {
		Source []string
		High   int64
		Gaps   []struct{ From, To int64 }
	}
	json.Unmarshal([]byte(mustRun(t, "", "sources", "--json", "-c", cfg)), &sources)
	found := false
	for _, s := range sources {
		if strings.Join(s.Source, "/") == "city-pd/car-12" {
			found = len(s.Gaps) == 1 && s.Gaps[0].From == 2 && s.Gaps[0].To == 2 && s.High == 3
		}
	}
	if !found {
		t.Errorf("car-12's lost sequence 2 is not reported as a gap: %+v", sources)
	}
	if out := mustRun(t, "", "audit", "verify", "-c", cfg); out != "audit chain intact: 46 records\n" {
		t.Errorf("audit verify: %q", out)
	}
	export := mustRun(t, "", "audit", "export", "-c", cfg)
	if n := strings.Count(export, "\n"); n != 46 {
		t.Errorf("audit export has %d lines, want 46", n)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	os.WriteFile(path, []byte(export), 0o644)
	mustRun(t, "", "audit", "verify", "--file", path, "-c", cfg)
	os.WriteFile(path, []byte(strings.Replace(export, `"outcome":"duplicate"`, `"outcome":"applied"`, 1)), 0o644)
	if _, errs, code := cli(t, "", "audit", "verify", "--file", path, "-c", cfg); code != 1 || !strings.Contains(errs, "broken at position") {
		t.Errorf("a tampered export verified: exit %d %s", code, errs)
	}
	if _, errs, code := cli(t, "", "audit", "verify", "--file", path, "--archive", t.TempDir(), "-c", cfg); code != 2 || !strings.Contains(errs, "not both") {
		t.Errorf("verify --file with --archive, whose archive would go unread: exit %d %s", code, errs)
	}
}

type held struct {
	ID         uint64
	Outcome    string
	Reason     string
	Topic      string
	Key        string
	Payload    json.RawMessage
	PayloadB64 string `json:"payload_b64"`
}

func listHeld(t *testing.T, cfg string) []held {
	t.Helper()
	var out []held
	for _, line := range strings.Split(strings.TrimSpace(mustRun(t, "", "quarantine", "list", "-c", cfg)), "\n") {
		if line == "" {
			continue
		}
		var h held
		if err := json.Unmarshal([]byte(line), &h); err != nil {
			t.Fatalf("quarantine list line %q: %v", line, err)
		}
		out = append(out, h)
	}
	return out
}

func TestQuarantineReleaseAndDiscard(t *testing.T) {
	cfg := testConfig(t, "")
	feed := []string{
		`{"topic":"incidents/fd/e1","payload":{"agency":"fd","source_id":"e1","boot_id":1,"sequence":100,"incident_id":"I1","casualty_delta":1}}`,
		// held back far beyond the 64-sequence window: cannot be proven either way
		`{"topic":"incidents/fd/e1","payload":{"agency":"fd","source_id":"e1","boot_id":1,"sequence":10,"incident_id":"I1","casualty_delta":2}}`,
		`{"topic":"incidents/fd/e1","payload_b64":"bm90IGpzb24="}`,
		`this line is not a capture record`,
	}
	out := mustRun(t, strings.Join(feed, "\n")+"\n", "ingest", "-c", cfg, "-")
	if !strings.Contains(out, "applied=1 ") || !strings.Contains(out, "quarantined=1 ") || !strings.Contains(out, "malformed=2 ") {
		t.Fatalf("summary %q", out)
	}
	hs := listHeld(t, cfg)
	if len(hs) != 3 {
		t.Fatalf("%d held, want 3: %+v", len(hs), hs)
	}
	if hs[0].Outcome != "quarantined" || hs[0].Reason != "below_window" || hs[0].Key == "" || !strings.Contains(string(hs[0].Payload), `"sequence":10`) {
		t.Errorf("held below-window message: %+v", hs[0])
	}
	if hs[1].PayloadB64 != "bm90IGpzb24=" || string(hs[1].Payload) != "null" {
		t.Errorf("raw bytes of a non-JSON payload: %+v", hs[1])
	}
	if !strings.Contains(hs[2].Reason, "capture line 4") {
		t.Errorf("a broken capture line: %+v", hs[2])
	}
	if out := mustRun(t, "", "quarantine", "release", fmt.Sprint(hs[0].ID), "-c", cfg); !strings.Contains(out, "released: applied") {
		t.Fatalf("release: %q", out)
	}
	if got := mustRun(t, "", "state", "--json", "-c", cfg); !strings.Contains(got, `"casualties": 3`) {
		t.Fatalf("state after release: %s", got)
	}
	// the same message replayed after its release is a duplicate
	out = mustRun(t, feed[1]+"\n", "ingest", "-c", cfg, "-")
	if !strings.HasPrefix(out, "applied=0 applied_late=0 duplicate=1 ") {
		t.Fatalf("replay after release: %q", out)
	}
	if _, errs, code := cli(t, "", "quarantine", "release", fmt.Sprint(hs[1].ID), "-c", cfg); code != 1 || !strings.Contains(errs, "still malformed") {
		t.Errorf("releasing a malformed message: exit %d %s", code, errs)
	}
	if _, errs, code := cli(t, "", "quarantine", "discard", fmt.Sprint(hs[1].ID), "-c", cfg); code != 2 || !strings.Contains(errs, "--reason") {
		t.Errorf("discard without a reason: exit %d %s", code, errs)
	}
	mustRun(t, "", "quarantine", "discard", fmt.Sprint(hs[1].ID), "--reason", "test garbage from a bench rig", "-c", cfg)
	if hs := listHeld(t, cfg); len(hs) != 1 {
		t.Errorf("%d still held after a release and a discard, want 1", len(hs))
	}
	if _, errs, code := cli(t, "", "quarantine", "release", "999", "-c", cfg); code != 1 || !strings.Contains(errs, "no quarantined message #999") {
		t.Errorf("release of an unknown id: exit %d %s", code, errs)
	}
	export := mustRun(t, "", "audit", "export", "-c", cfg)
	if !strings.Contains(export, `"outcome":"discarded","reason":"test garbage from a bench rig"`) {
		t.Errorf("the discard is not audited:\n%s", export)
	}
	mustRun(t, "", "audit", "verify", "-c", cfg)
}

func TestCommandLineMistakes(t *testing.T) {
	cfg := testConfig(t, "")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("window: {ttl: forever}\nroutes:\n  - name: r\n    topic: a/#\n    source: [x]\n"), 0o644)
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"an unknown command is a usage error", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"ingest without a file is a usage error", []string{"ingest", "-c", cfg}, 2, "ingest takes one FILE"},
		{"a missing capture file is an error", []string{"ingest", "-c", cfg, "/nonexistent.jsonl"}, 1, "no such file"},
		{"a broken config lists its problems", []string{"lint", "-c", bad}, 1, "neither sequence nor id"},
		{"a bad duration is named", []string{"lint", "-c", bad}, 1, "window.ttl"},
		{"a missing config file is an error", []string{"state", "-c", "/nonexistent.yaml"}, 1, "no such file"},
		{"an unknown flag is a usage error", []string{"state", "--frob", "-c", cfg}, 2, "flag provided but not defined"},
		{"state before any ingest says so", []string{"state", "-c", cfg}, 1, "no store at"},
		{"a file given to lint as an argument is not taken for the configuration", []string{"lint", "-c", cfg, bad}, 2,
			"takes no arguments, got [\"" + bad + "\"]: to use " + bad + " as the configuration, give --config " + bad},
		{"an argument run takes none of is a usage error", []string{"run", "-c", cfg, "now"}, 2, `takes no arguments, got ["now"]`},
		{"an argument of a command without a configuration is a usage error", []string{"demo", "plant"}, 2, `takes no arguments, got ["plant"]`},
		{"a malformed entity pattern is a usage error", []string{"state", "-c", cfg, "incident/[7"}, 2, `entity pattern "incident/[7"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs, code := cli(t, "", c.args...)
			if code != c.code || !strings.Contains(errs, c.msg) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errs, c.code, c.msg)
			}
		})
	}
}

func TestBenchDecidesEveryGeneratedMessage(t *testing.T) {
	out := mustRun(t, "", "bench", "--messages", "3000", "--sources", "7", "--replays", "0.2", "--dir", filepath.Join(t.TempDir(), "d"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "msg/s durable") {
		t.Fatalf("bench output %q", out)
	}
	var applied, late, dup, conflict, quarantined, malformed, total int
	fmt.Sscanf(lines[1], "applied=%d applied_late=%d duplicate=%d conflict=%d quarantined=%d malformed=%d total=%d",
		&applied, &late, &dup, &conflict, &quarantined, &malformed, &total)
	if applied != 3000 || late+conflict+quarantined+malformed != 0 || dup < 400 || dup > 800 || total != applied+dup {
		t.Fatalf("bench summary %q: every update applied once and every replay a duplicate", lines[1])
	}
}

// TestWhatAnActionDoesNotReadIsRefused: an id after `quarantine list`, or
// a flag another action of the command reads (`audit verify --from 100`
// verifies every record, `outbox list --member M` lists every member's
// entries), is a usage error naming it, never ignored; the flags every
// action takes pass.
func TestWhatAnActionDoesNotReadIsRefused(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, `{"topic":"incidents/fd/e1","payload":`+string(incidentPayload("e1", 1))+"}\nnot json\n", "ingest", "-c", cfg, "-")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"quarantine", "list", "2"}, "quarantine list takes no argument"},
		{[]string{"quarantine", "list", "--reason", "x"}, "quarantine list does not take --reason"},
		{[]string{"quarantine", "release", "2", "--reason", "checked by hand"}, "quarantine release does not take --reason"},
		{[]string{"audit", "verify", "--from", "100"}, "audit verify does not take --from"},
		{[]string{"audit", "export", "--archive", "/tmp", "--file", "x"}, "audit export does not take --archive, --file"},
		{[]string{"audit", "forget-sink", "gone", "--reason", "x", "--from", "3"}, "audit forget-sink does not take --from"},
		{[]string{"outbox", "list", "--member", "replayguard-2"}, "outbox list does not take --member"},
		{[]string{"store", "loss", "--operator", "alice"}, "store loss does not take --operator"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, errs, code := cli(t, "", append(c.args, "-c", cfg)...)
			if code != exitUsage || !strings.Contains(errs, c.msg) {
				t.Fatalf("exit %d, stderr %q, stdout %q; want exit %d and %q", code, errs, out, exitUsage, c.msg)
			}
		})
	}
	withOperatorToken(t, cfg, "ops") // --token-name must name one of http.tokens, whichever way the command reads
	if _, errs, code := cli(t, "", "audit", "export", "--from", "2", "--token-name", "ops", "--log-level", "error", "-c", cfg); code != exitOK {
		t.Fatalf("audit export with the flags every action takes: exit %d\n%s", code, errs)
	}
}
