package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// group returns a memory group where members m1 and m2 each decided n
// readings, and its export.
func group(t *testing.T, n int) (*memory.Member, []string) {
	t.Helper()
	g := memory.NewGroup(0, 0)
	for _, member := range []string{"m1", "m2"} {
		m, err := g.Open(member)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(context.Background(), m, engine.Options{Routes: []engine.Route{{
			Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
			Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			msg := engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d","kwh":0.25}`, i)}
			if _, err := e.Process(context.Background(), []engine.Message{msg}); err != nil {
				t.Fatal(err)
			}
		}
		e.Close()
		m.Close()
	}
	ro, _ := g.Open("")
	var buf bytes.Buffer
	if got, err := audit.ExportChains(context.Background(), ro, 1, &buf); err != nil || got != uint64(2*n) {
		t.Fatalf("exported %d records, err %v; want %d", got, err, 2*n)
	}
	return ro, strings.Split(strings.TrimSpace(buf.String()), "\n")
}

func TestVerifyChainsOfAGroup(t *testing.T) {
	ro, lines := group(t, 4)
	res, err := audit.VerifyChains(context.Background(), ro, nil)
	if err != nil || len(res) != 2 || res[0].Member != "m1" || res[0].Records != 4 || res[1].Member != "m2" || res[1].Records != 4 ||
		res[0].Head.Position != 4 || res[0].Base != (engine.AuditHead{}) {
		t.Fatalf("VerifyChains = %+v, %v", res, err)
	}
	// The second member's replays of the first's readings were duplicates,
	// and each record names its member.
	for i, l := range lines {
		var r engine.AuditRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		want, outcome := "m1", "applied"
		if i >= 4 {
			want, outcome = "m2", "duplicate"
		}
		if r.Member != want || r.Outcome != outcome {
			t.Fatalf("record %d: member %q outcome %s, want %q %s", i, r.Member, r.Outcome, want, outcome)
		}
	}
	// Interleaved chains verify: each chain is checked on its own.
	mixed := []string{lines[0], lines[4], lines[1], lines[5], lines[2], lines[3], lines[6], lines[7]}
	if n, err := audit.VerifyJSONL(strings.NewReader(strings.Join(mixed, "\n"))); err != nil || n != 8 {
		t.Fatalf("VerifyJSONL of interleaved chains = %d, %v", n, err)
	}
}

func TestVerifyJSONLFindsARecordMovedToAnotherChain(t *testing.T) {
	_, lines := group(t, 3)
	var r map[string]any
	json.Unmarshal([]byte(lines[4]), &r)
	r["member"] = "m1" // m2's second record claimed by m1
	b, _ := json.Marshal(r)
	lines[4] = string(b)
	_, err := audit.VerifyJSONL(strings.NewReader(strings.Join(lines, "\n")))
	var be *audit.BrokenError
	if !errors.As(err, &be) || be.Member != "m1" {
		t.Fatalf("VerifyJSONL = %v, want a break in m1's chain", err)
	}
}
