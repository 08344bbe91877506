package main

import (
	"fmt"
	"strings"
	"testing"
)

// A --reason over 4096 bytes, or an --operator over 200, is refused on a
// local store as the API refuses it, naming the size and never echoing the
// text, and the entry stays held: one decision has one bound, whichever
// way it is made.
func TestAReasonOrOperatorOverTheAPIsBoundIsRefusedOnALocalStore(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, `{"topic":"incidents/fd/e1","payload_b64":"bm90IGpzb24="}`+"\n", "ingest", "-c", cfg, "-")
	hs := listHeld(t, cfg)
	if len(hs) != 1 {
		t.Fatalf("%d held, want 1", len(hs))
	}
	id := fmt.Sprint(hs[0].ID)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"quarantine", "discard", id, "--reason", strings.Repeat("r", 4097)}, "--reason is 4097 bytes, over 4096"},
		{[]string{"quarantine", "discard", id, "--reason", "bench rig", "--operator", strings.Repeat("o", 201)}, "--operator is 201 bytes, over 200"},
		{[]string{"outbox", "hold", "1", "--reason", strings.Repeat("r", 100000)}, "--reason is 100000 bytes, over 4096"},
		{[]string{"audit", "forget-sink", "gone", "--reason", strings.Repeat("r", 4097)}, "--reason is 4097 bytes, over 4096"},
	} {
		_, errs, code := cli(t, "", append(tc.args, "-c", cfg)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || len(errs) > 1000 {
			t.Fatalf("%s: exit %d, want %d saying %q in a short message\n%.300s", strings.Join(tc.args[:2], " "), code, exitUsage, tc.want, errs)
		}
	}
	if hs := listHeld(t, cfg); len(hs) != 1 {
		t.Fatalf("%d held after refused discards, want 1", len(hs))
	}
	mustRun(t, "", "quarantine", "discard", id, "--reason", strings.Repeat("r", 4096), "--operator", strings.Repeat("o", 200), "-c", cfg)
	if hs := listHeld(t, cfg); len(hs) != 0 {
		t.Fatalf("%d held after a discard at the bounds, want 0", len(hs))
	}
}
