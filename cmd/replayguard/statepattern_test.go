package main

import (
	"strings"
	"testing"
)

// state's line saying that no entity matches prints the patterns as state
// prints names: a control character in one is escaped, never sent to the
// terminal raw. A pattern longer than any entity name is a usage error
// that does not echo it whole.
func TestStatePrintsAPatternThatMatchesNothingEscapedAndRefusesAHugeOne(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, "", "ingest", "-c", cfg, "../../examples/meters.jsonl")
	_, errs, code := cli(t, "", "state", "-c", cfg, "x\x1b]0;owned\a")
	if code != 0 || !strings.Contains(errs, `no entity matches "x\x1b]0;owned\a"`) || strings.ContainsAny(errs, "\x1b\a") {
		t.Fatalf("exit %d, want 0 and the pattern escaped:\n%q", code, errs)
	}
	_, errs, code = cli(t, "", "state", "-c", cfg, strings.Repeat("?*", 50000))
	if code != exitUsage || !strings.Contains(errs, "is 100000 bytes, over 2048") || len(errs) > 1000 {
		t.Fatalf("exit %d, want %d and a short message:\n%.300s", code, exitUsage, errs)
	}
}
