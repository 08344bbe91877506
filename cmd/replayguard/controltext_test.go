package main

import (
	"fmt"
	"strings"
	"testing"
)

// A producer's text holding terminal controls (an escape sequence, a line
// break, a tab, a C1 control) is printed by the text of state, sources and
// explain escaped and quoted: it cannot recolour the terminal, retitle it
// or forge a line or a cell. --json is JSON as before.
func TestAProducersControlCharactersArePrintedEscaped(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, `{"topic":"incidents/fd/e1","payload":{"agency":"fd\u001b[31m","source_id":"e1\nforged row","boot_id":"b\u001b]0;owned\u0007",`+
		`"sequence":1,"incident_id":"I1\tx\u0085","casualty_delta":1,"incident_status":"open\u001b[2J"}}`+"\n", "ingest", "-c", cfg, "-")
	entity := "incident/I1\tx\u0085"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"state"}, []string{`"incident/I1\tx\u0085"`, `status="open\u001b[2J"`}},
		{[]string{"sources"}, []string{`"fd\x1b[31m"/"e1\nforged row"`, `"b\x1b]0;owned\a"`}},
		{[]string{"explain", entity}, []string{`"incident/I1\tx\u0085": 1 change`, `source "fd\x1b[31m"/"e1\nforged row"`,
			`epoch "b\x1b]0;owned\a"`, `status set "open\u001b[2J" -> "open\u001b[2J"`}},
	} {
		out := mustRun(t, "", append(tc.args, "-c", cfg)...)
		if i := strings.IndexFunc(out, func(r rune) bool { return r < ' ' && r != '\n' || r >= 0x7f && r <= 0x9f }); i >= 0 {
			t.Errorf("%s prints a control character raw at %d:\n%q", tc.args[0], i, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s prints no %s:\n%s", tc.args[0], w, out)
			}
		}
	}
	if lines := strings.Count(mustRun(t, "", "sources", "-c", cfg), "\n"); lines != 2 {
		t.Errorf("sources prints %d lines for one source, want 2 (the header and its row)", lines)
	}
	if out := mustRun(t, "", "state", "--json", "-c", cfg); !strings.Contains(out, `"incident/I1\tx`+"\u0085"+`"`) {
		t.Errorf("state --json changed:\n%s", out)
	}
}

// A discard's --reason with a control character other than tab is
// refused, as an --operator with one is, and the entry stays held; a tab
// is taken.
func TestAReasonWithControlCharactersIsRefused(t *testing.T) {
	cfg := testConfig(t, "")
	mustRun(t, `{"topic":"incidents/fd/e1","payload_b64":"bm90IGpzb24="}`+"\n", "ingest", "-c", cfg, "-")
	hs := listHeld(t, cfg)
	if len(hs) != 1 {
		t.Fatalf("%d held, want 1", len(hs))
	}
	id := fmt.Sprint(hs[0].ID)
	for _, reason := range []string{"bench rig\x1b[2K", "bench\x00rig", "bench\nrig", "bench\rrig", "bad\xffbyte"} {
		_, errs, code := cli(t, "", "quarantine", "discard", id, "--reason", reason, "-c", cfg)
		if code != exitUsage || !strings.Contains(errs, "has control characters") {
			t.Fatalf("discard --reason %q: exit %d, want %d\n%s", reason, code, exitUsage, errs)
		}
	}
	if hs := listHeld(t, cfg); len(hs) != 1 {
		t.Fatalf("%d held after refused discards, want 1", len(hs))
	}
	mustRun(t, "", "quarantine", "discard", id, "--reason", "bench\trig", "-c", cfg)
	if hs := listHeld(t, cfg); len(hs) != 0 {
		t.Fatalf("%d held after a discard with a tab in its reason, want 0", len(hs))
	}
}
