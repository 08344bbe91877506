package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAuditVerifyOfAnExportCutShortIsNeverWhole: an export cut between two
// records verifies as far as it goes, but the store it came from says
// which of its positions the file lacks, and without the store the result
// says the file's end is not verified; an export cut inside a record is an
// error naming the line. A whole export verifies as it always did.
func TestAuditVerifyOfAnExportCutShortIsNeverWhole(t *testing.T) {
	t.Setenv("REPLAYGUARD_CONFIG", "")
	cfg := testConfig(t, "")
	mustRun(t, "", "ingest", "--config", cfg, "../../examples/incidents.jsonl")
	export := mustRun(t, "", "audit", "export", "-c", cfg)
	lines := strings.SplitAfter(strings.TrimSuffix(export, "\n"), "\n")
	if len(lines) != 29 {
		t.Fatalf("the export has %d lines, want 29", len(lines))
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	whole := write("whole.jsonl", export)
	cut := write("cut.jsonl", strings.Join(lines[:24], ""))
	midLine := write("midline.jsonl", export[:len(export)-100])

	if out := mustRun(t, "", "audit", "verify", "--file", whole, "-c", cfg); out != "audit chain intact: 29 records\n" {
		t.Errorf("verify of the whole export = %q", out)
	}
	want := "audit chain intact as far as the file goes: 24 records\n" +
		"the chain ends at position 24 in the file, but the store's chain head is at 29: positions 25..29 are not in the file (it was cut short, or exported before they were written) and are not verified\n"
	if out := mustRun(t, "", "audit", "verify", "--file", cut, "-c", cfg); out != want {
		t.Errorf("verify of an export cut short, with its store:\n%s\nwant\n%s", out, want)
	}
	out := mustRun(t, "", "audit", "verify", "--file", cut)
	if !strings.HasPrefix(out, "audit chain intact as far as the file goes: 24 records\nthe chain ends at position 24 in the file (hash ") ||
		!strings.Contains(out, "the end is not verified: no configuration was given") {
		t.Errorf("verify of an export cut short, without a store: %q", out)
	}
	_, errs, code := cli(t, "", "audit", "verify", "--file", midLine, "-c", cfg)
	if code != 1 || !strings.Contains(errs, "the file is cut short: its last line, 29, ends inside an audit record") ||
		!strings.Contains(errs, "after the record at position 28") {
		t.Errorf("verify of an export cut inside a record: exit %d %s", code, errs)
	}
	other := testConfig(t, "")
	mustRun(t, "", "ingest", "--config", other, "../../examples/meters.jsonl")
	if _, errs, code := cli(t, "", "audit", "verify", "--file", cut, "-c", other); code != 1 || !strings.Contains(errs, "broken at position") {
		t.Errorf("verify of an export against another store: exit %d %s", code, errs)
	}
}

// TestAuditVerifyOfAGroupsExportNamesWhatTheStoreHoldsBeyondIt: on a
// shared store, an export compared with the store names a member's chain
// the file lacks, and the records the store holds outside every chain it
// lists, which no export holds; a chain in the file the store does not
// list is a break.
func TestAuditVerifyOfAGroupsExportNamesWhatTheStoreHoldsBeyondIt(t *testing.T) {
	r := testbroker.StartRedis(t, testbroker.RedisOptions{})
	cfg := map[string]string{}
	for i, m := range []string{"m1", "m2"} {
		cfg[m] = storeConfig(t, fmt.Sprintf(`{kind: redis, url: %q, prefix: "{ends}:", member: %s}`, r.URL(), m))
		mustRun(t, "", "ingest", "-c", cfg[m], meterFeed(t, 100*i, 30))
	}
	dir := t.TempDir()
	export := mustRun(t, "", "audit", "export", "-c", cfg["m1"])
	both, one := filepath.Join(dir, "both.jsonl"), filepath.Join(dir, "one.jsonl")
	var m1 strings.Builder
	for _, l := range strings.SplitAfter(export, "\n") {
		if strings.Contains(l, `"member":"m1"`) {
			m1.WriteString(l)
		}
	}
	for path, text := range map[string]string{both: export, one: m1.String()} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out := mustRun(t, "", "audit", "verify", "--file", both, "-c", cfg["m1"]); out != "audit chain intact: 60 records\n" {
		t.Errorf("verify of the whole export = %q", out)
	}
	if _, err := r.Do("HDEL", "{ends}:heads", "m2"); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := cli(t, "", "audit", "verify", "--file", both, "-c", cfg["m1"]); code != 1 || !strings.Contains(errs, "member m2") {
		t.Errorf("verify of an export holding a chain the store no longer lists: exit %d %s", code, errs)
	}
	want := "audit chain intact as far as the file goes: 30 records\n" +
		"the store holds records of member m2's chain up to position 30, past the chain head it keeps (0): no export holds them, and audit verify reports them as a break\n"
	if out := mustRun(t, "", "audit", "verify", "--file", one, "-c", cfg["m1"]); out != want {
		t.Errorf("verify of an export of a store holding records outside every chain:\n%s\nwant\n%s", out, want)
	}
}
