package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestQuarantineResolvesSeveralEntries: release and discard take several
// ids; an entry that cannot be resolved is reported and the others are
// resolved.
func TestQuarantineResolvesSeveralEntries(t *testing.T) {
	cfg := testConfig(t, "")
	var feed []string
	feed = append(feed, `{"topic":"incidents/fd/e1","payload":{"agency":"fd","source_id":"e1","boot_id":1,"sequence":100,"incident_id":"I1","casualty_delta":1}}`)
	for seq := 10; seq < 13; seq++ { // far below the 64-sequence window: held
		feed = append(feed, fmt.Sprintf(`{"topic":"incidents/fd/e1","payload":{"agency":"fd","source_id":"e1","boot_id":1,"sequence":%d,"incident_id":"I1","casualty_delta":2}}`, seq))
	}
	feed = append(feed, `{"topic":"incidents/fd/e1","payload_b64":"bm90IGpzb24="}`, `not a capture record`)
	mustRun(t, strings.Join(feed, "\n")+"\n", "ingest", "-c", cfg, "-")
	hs := listHeld(t, cfg)
	if len(hs) != 5 {
		t.Fatalf("%d held, want 5: %+v", len(hs), hs)
	}
	id := func(i int) string { return fmt.Sprint(hs[i].ID) }

	// a malformed one among them is still malformed: the two others apply
	out, errs, code := cli(t, "", "quarantine", "release", id(0), id(3), id(1), "-c", cfg)
	if code != 1 || strings.Count(out, "released: applied") != 2 || !strings.Contains(errs, "#"+id(3)+": ") || !strings.Contains(errs, "still malformed") ||
		!strings.Contains(errs, "1 of 3 entries not released") {
		t.Fatalf("release of three, one malformed: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if got := mustRun(t, "", "state", "--json", "-c", cfg); !strings.Contains(got, `"casualties": 5`) {
		t.Fatalf("state after the releases: %s", got)
	}
	// one already released, one never held: the two others go
	out, errs, code = cli(t, "", "quarantine", "discard", id(0), id(2), "999", id(4), "--reason", "bench rig", "-c", cfg)
	if code != 1 || strings.Count(out, "discarded") != 2 || !strings.Contains(errs, "no quarantined message #"+id(0)) ||
		!strings.Contains(errs, "no quarantined message #999") || !strings.Contains(errs, "2 of 4 entries not discarded") {
		t.Fatalf("discard of four, two not held: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
	if left := listHeld(t, cfg); len(left) != 1 || left[0].ID != hs[3].ID {
		t.Fatalf("held after both: %+v, want #%d alone", left, hs[3].ID)
	}
	if _, errs, code := cli(t, "", "quarantine", "discard", id(3), "0", "--reason", "r", "-c", cfg); code != 2 || !strings.Contains(errs, `"0" is not a quarantine id`) {
		t.Fatalf("an id of 0 among them: exit %d %s", code, errs)
	}
	if len(listHeld(t, cfg)) != 1 {
		t.Fatal("a command with a bad id resolved an entry")
	}
	mustRun(t, "", "audit", "verify", "-c", cfg)
}
