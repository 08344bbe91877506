package main

import (
	"fmt"
	"testing"
)

// A discard or drop whose --reason is only white space has no reason, as
// the API says of the same body: it is refused with exit 2, and the entry
// stays held.
func TestABlankReasonIsRefused(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, `{"topic":"incidents/fd/e1","payload_b64":"bm90IGpzb24="}`+"\n", "ingest", "-c", cfg, "-")
	hs := listHeld(t, cfg)
	if len(hs) != 1 {
		t.Fatalf("%d held, want 1", len(hs))
	}
	_, errs, code := cli(t, "", "quarantine", "discard", fmt.Sprint(hs[0].ID), "--reason", "   ", "-c", cfg)
	if code != exitUsage {
		t.Fatalf("discard --reason '   ': exit %d, want %d\n%s", code, exitUsage, errs)
	}
	if hs := listHeld(t, cfg); len(hs) != 1 {
		t.Fatalf("%d held after a discard without a reason, want 1", len(hs))
	}
}
