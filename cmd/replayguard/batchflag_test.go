package main

import (
	"strings"
	"testing"
)

// --batch below 1 is a command-line mistake, named, not a silent 1000;
// one of a billion, named too, not a crash out of memory.
func TestIngestRefusesABatchOutOfRange(t *testing.T) {
	cfg := testConfig(t, "")
	for _, n := range []string{"0", "-5", "1000000000"} {
		_, errs, code := cli(t, "", "ingest", "--batch", n, "-c", cfg, "-")
		if code != exitUsage || !strings.Contains(errs, "--batch") {
			t.Errorf("ingest --batch %s: exit %d, want %d naming --batch\n%s", n, code, exitUsage, errs)
		}
	}
}
