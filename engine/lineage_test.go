package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// changesOf returns the effects of every record, as "position entity field
// op value after [lost]" lines.
func (h *harness) changesOf() string {
	h.t.Helper()
	var out []string
	err := h.store.ScanAudit(context.Background(), 1, func(r engine.AuditRecord) error {
		for _, c := range r.Effects {
			line := strings.Join([]string{r.Outcome, c.Entity, c.Field, c.Op, string(c.Value), string(c.After)}, " ")
			if c.Lost {
				line += " lost"
			}
			out = append(out, line)
		}
		if o, _ := engine.ParseOutcome(r.Outcome); len(r.Effects) > 0 && !o.Effective() {
			h.t.Errorf("position %d: a %s record has effects", r.Position, r.Outcome)
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// An applied record says what each operation did: the value it brought and
// the field's value after it, a late `set` that lost to a newer one marked
// so; a duplicate, a conflict and a held message change nothing and say
// nothing.
func TestAppliedRecordsSayWhatTheyChanged(t *testing.T) {
	h := newHarness(t, engine.Options{})
	got := h.outcomes(
		inc("fd", "e1", 1, 1, `"incident_id":"7","casualty_delta":3,"unit_id":"E1","unit_status":"assigned"`),
		inc("fd", "e1", 1, 3, `"incident_id":"7","casualty_delta":-1,"unit_id":"E1","unit_status":"available <&>"`),
		inc("fd", "e1", 1, 1, `"incident_id":"7","casualty_delta":3,"unit_id":"E1","unit_status":"assigned"`),
		inc("fd", "e1", 1, 2, `"incident_id":"7","casualty_delta":2.50,"unit_id":"E1","unit_status":"en route"`),
		inc("fd", "e1", 1, 3, `"incident_id":"7","casualty_delta":9,"unit_id":"E1","unit_status":"x"`),
		meter("m1", "r1", "0.25"),
		engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r2","kw":4}`)},
		engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r3","kw":3,"kwh":"x"}`)},
	)
	if want := "applied applied duplicate applied_late conflict applied applied malformed"; got != want {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
	want := strings.Join([]string{
		`applied incident/7 casualties add 3 3`,
		`applied unit/E1 status set "assigned" "assigned"`,
		`applied incident/7 casualties add -1 2`,
		`applied unit/E1 status set "available \u003c\u0026\u003e" "available \u003c\u0026\u003e"`,
		`applied_late incident/7 casualties add 2.5 4.5`,
		`applied_late unit/E1 status set "en route" "available \u003c\u0026\u003e" lost`,
		`applied meter/m1 kwh add 0.25 0.25`,
		`applied meter/m1 peak max 4 4`,
		`applied meter/m1 low min 4 4`,
	}, "\n")
	if got := h.changesOf(); got != want {
		t.Fatalf("effects:\n%s\nwant:\n%s", got, want)
	}
	// The last `after` of each field is its state.
	var state map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(h.state()), &state); err != nil {
		t.Fatal(err)
	}
	if c, s := string(state["incident/7"]["casualties"]), string(state["unit/E1"]["status"]); c != "4.5" || s != `"available \u003c\u0026\u003e"` {
		t.Fatalf("state: casualties %s, status %s", c, s)
	}
}

// The effects are part of what the chain hashes: a record whose effects
// are altered no longer links.
func TestEffectsAreHashed(t *testing.T) {
	h := newHarness(t, engine.Options{})
	h.feed(inc("fd", "e1", 1, 1, `"incident_id":"7","casualty_delta":3`))
	var r engine.AuditRecord
	if err := h.store.ScanAudit(context.Background(), 1, func(x engine.AuditRecord) error { r = x; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(r.Effects) != 1 {
		t.Fatalf("effects %+v", r.Effects)
	}
	if h, _ := engine.ChainHash(r); h != r.Hash {
		t.Fatal("the record as written does not hash to its hash")
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, alter := range []struct{ from, to string }{{`"value":3`, `"value":6`}, {`"after":3`, `"after":6`}, {`"op":"add"`, `"op":"set"`}, {`,"effects":[{"entity":"incident/7","field":"casualties","op":"add","value":3,"after":3}]`, ``}} {
		var back engine.AuditRecord
		if err := json.Unmarshal([]byte(strings.Replace(string(b), alter.from, alter.to, 1)), &back); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), alter.from) {
			t.Fatalf("%s is not in %s", alter.from, b)
		}
		if h, _ := engine.ChainHash(back); h == r.Hash {
			t.Errorf("%s → %s: the record still links", alter.from, alter.to)
		}
	}
}
