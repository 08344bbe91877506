package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// TestAStoreLossIsReported: a shared store that failed over lost a
// member's commits; the member decided again what its journal held and an
// operator accepted the loss of the rest. The chain after it verifies, so
// the report must say what was lost, recovered and accepted, and by whom.
func TestAStoreLossIsReported(t *testing.T) {
	accepted := engine.AuditRecord{Time: start.Add(200e9), Outcome: engine.OutcomeLossAccepted, Operator: "duty officer",
		Reason: `the postgres store lost positions 3..40 of member "b"'s chain (committed up to 40, the store's head was 2); positions 31..40 are in no journal and are accepted as lost`}
	recovered := engine.AuditRecord{Time: start.Add(201e9), Outcome: engine.OutcomeRecovered,
		Reason: `the postgres store lost positions 3..40 of member "b"'s chain; 28 deliveries decided again from the journal`}
	g := group{
		"a": chain(t, "a", rec(10, "applied", primary, 1), rec(70, "applied", primary, 2)),
		"b": chain(t, "b", rec(20, "applied", primary, 1), rec(30, "applied", primary, 2), accepted, recovered, rec(210, "applied", standby, 3)),
	}
	recs, heads, err := report.Chains(context.Background(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(recs, report.Options{Heads: heads, Route: "incidents"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verification.Intact {
		t.Fatalf("verification %+v", rep.Verification)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := report.RenderHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"loss_accepted", "recovered", "duty officer", "positions 31..40 are in no journal and are accepted as lost", "28 deliveries decided again from the journal"} {
		if !bytes.Contains(b, []byte(s)) {
			t.Errorf("the JSON does not say %q", s)
		}
		if !strings.Contains(page.String(), strings.ReplaceAll(s, `"`, "&#34;")) {
			t.Errorf("the page does not say %q", s)
		}
	}
}
