package main

import (
	"encoding/json"
	"fmt"
	"os/user"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/internal/app"
)

// auditOperators returns the operator of each release and discard record
// of the export, by outcome and ref.
func auditOperators(t *testing.T, cfg string) map[string]string {
	t.Helper()
	ops := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(mustRun(t, "", "audit", "export", "-c", cfg)), "\n") {
		var r struct {
			Outcome  string
			Ref      uint64
			Operator *string
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Ref == 0 {
			if r.Operator != nil {
				t.Fatalf("a delivery's record names an operator: %s", line)
			}
			continue
		}
		if r.Operator == nil {
			t.Fatalf("a review record names nobody: %s", line)
		}
		ops[fmt.Sprintf("%s #%d", r.Outcome, r.Ref)] = *r.Operator
	}
	return ops
}

func TestQuarantineNamesTheOperator(t *testing.T) {
	cfg := testConfig(t, "")
	feed := `{"topic":"incidents/fd/e1","payload":{"agency":"fd","source_id":"e1","boot_id":1,"sequence":100,"incident_id":"I1","casualty_delta":1}}
{"topic":"incidents/fd/e1","payload":{"agency":"fd","source_id":"e1","boot_id":1,"sequence":10,"incident_id":"I1","casualty_delta":2}}
{"topic":"incidents/fd/e1","payload":{"agency":"fd","source_id":"e1","boot_id":1,"sequence":11,"incident_id":"I1","casualty_delta":2}}
{"topic":"incidents/fd/e1","payload_b64":"bm90IGpzb24="}
`
	mustRun(t, feed, "ingest", "-c", cfg, "-")
	hs := listHeld(t, cfg)
	if len(hs) != 3 {
		t.Fatalf("%d held, want 3", len(hs))
	}
	mustRun(t, "", "quarantine", "release", fmt.Sprint(hs[0].ID), "--operator", "duty officer", "-c", cfg)
	mustRun(t, "", "quarantine", "discard", fmt.Sprint(hs[2].ID), "--reason", "bench rig", "--operator", "j.doe", "-c", cfg)
	mustRun(t, "", "quarantine", "release", fmt.Sprint(hs[1].ID), "-c", cfg)
	me, err := app.LocalOperator("")
	if err != nil {
		t.Fatal(err)
	}
	if u, err := user.Current(); err == nil && u.Username != me {
		t.Fatalf("the default operator is %q, the OS user %q", me, u.Username)
	}
	want := map[string]string{
		fmt.Sprintf("applied #%d", hs[0].ID):   "duty officer",
		fmt.Sprintf("discarded #%d", hs[2].ID): "j.doe",
		fmt.Sprintf("applied #%d", hs[1].ID):   me,
	}
	got := auditOperators(t, cfg)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("operators in the audit export: %v, want %v", got, want)
	}
	mustRun(t, "", "audit", "verify", "-c", cfg)
}

func TestLocalOperatorRefusesControlCharacters(t *testing.T) {
	for _, name := range []string{"j.doe\x1b[31m", "duty\nofficer", "bad\xffname"} {
		if _, err := app.LocalOperator(name); err == nil {
			t.Errorf("--operator %q accepted", name)
		}
	}
	if got, err := app.LocalOperator("  duty officer "); err != nil || got != "duty officer" {
		t.Errorf("--operator with spaces around = %q, %v; want it trimmed", got, err)
	}
}
