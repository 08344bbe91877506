package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

func TestEffects(t *testing.T) {
	t.Run("add sums exact decimals", func(t *testing.T) {
		h := newHarness(t, engine.Options{})
		h.feed(meter("m3", "a", "0.1"), meter("m3", "b", "0.2"), meter("m3", "c", "0.25"))
		if got, want := h.state(), `{"meter/m3":{"kwh":0.55}}`; got != want {
			t.Fatalf("state %s, want %s", got, want)
		}
	})
	t.Run("add stays exact across a thousand orders of magnitude", func(t *testing.T) {
		h := newHarness(t, engine.Options{})
		h.feed(meter("m3", "a", "1e900"), meter("m3", "b", "1e-900"), meter("m3", "c", "-1e900"))
		if got, want := h.state(), `{"meter/m3":{"kwh":0.`+strings.Repeat("0", 899)+`1}}`; got != want {
			t.Fatalf("state %.80s…, want %.80s…", got, want)
		}
	})
	t.Run("max and min keep the extremes", func(t *testing.T) {
		h := newHarness(t, engine.Options{})
		for i, kw := range []string{"5", "9.5", "2", "7"} {
			h.feed(engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"` + string(rune('a'+i)) + `","kw":` + kw + `}`)})
		}
		if got, want := h.state(), `{"meter/m1":{"low":2,"peak":9.5}}`; got != want {
			t.Fatalf("state %s, want %s", got, want)
		}
	})
	t.Run("set keeps the newest writer by epoch and sequence", func(t *testing.T) {
		h := newHarness(t, engine.Options{})
		h.feed(inc("fd", "e1", 1, 1, `"unit_id":"E7","unit_status":"assigned"`),
			inc("fd", "e1", 1, 3, `"unit_id":"E7","unit_status":"available"`),
			inc("fd", "e1", 1, 2, `"unit_id":"E7","unit_status":"enroute"`))
		if got, want := h.state(), `{"unit/E7":{"status":"available"}}`; got != want {
			t.Fatalf("state %s, want %s", got, want)
		}
		h.feed(inc("fd", "e1", 2, 1, `"unit_id":"E7","unit_status":"out_of_service"`))
		if got, want := h.state(), `{"unit/E7":{"status":"out_of_service"}}`; got != want {
			t.Fatalf("after a new epoch: state %s, want %s", got, want)
		}
	})
	t.Run("an absent path does nothing and an absent template field skips the effect", func(t *testing.T) {
		h := newHarness(t, engine.Options{})
		h.feed(inc("fd", "e1", 1, 1, `"incident_id":7,"casualty_delta":3`),
			inc("fd", "e1", 1, 2, `"incident_id":7`),
			inc("fd", "e1", 1, 3, `"casualty_delta":5,"unit_status":"x"`))
		if got, want := h.state(), `{"incident/7":{"casualties":3}}`; got != want {
			t.Fatalf("state %s, want %s", got, want)
		}
	})
	t.Run("a value whose effect names an absent or null field is said to go nowhere", func(t *testing.T) {
		h := newHarness(t, engine.Options{})
		ds := h.feed(inc("fd", "e1", 1, 1, `"incident_id":7,"casualty_delta":3`), // unit/{unit_id}: nothing to set
			inc("fd", "e1", 1, 2, `"casualty_delta":5,"unit_id":"E7","unit_status":"x"`),
			inc("fd", "e1", 1, 3, `"incident_id":null,"casualty_delta":2`),
			inc("fd", "e1", 1, 4, `"unit_status":"y"`))
		want := []string{
			"",
			`effects[0] not applied: its entity "incident/{incident_id}" names incident_id, absent, and casualty_delta went nowhere`,
			`effects[0] not applied: its entity "incident/{incident_id}" names incident_id, null, and casualty_delta went nowhere`,
			`effects[1] not applied: its entity "unit/{unit_id}" names unit_id, absent, and unit_status went nowhere`,
		}
		for i, d := range ds {
			if d.Outcome != engine.Applied || d.Reason != want[i] {
				t.Errorf("message %d: %s %q, want applied %q", i+1, d.Outcome, d.Reason, want[i])
			}
		}
		if got, want := h.state(), `{"incident/7":{"casualties":3},"unit/E7":{"status":"x"}}`; got != want {
			t.Fatalf("state %s, want %s", got, want)
		}
	})
	t.Run("the failover story: replays do not double casualties nor flip the engine back", func(t *testing.T) {
		h := newHarness(t, engine.Options{})
		story := []engine.Message{
			inc("fd", "e1", 1, 1, `"incident_id":7,"casualty_delta":3`),
			inc("fd", "e1", 1, 2, `"unit_id":"E7","unit_status":"assigned"`),
			inc("fd", "e1", 1, 3, `"unit_id":"E7","unit_status":"available"`),
		}
		h.feed(story...)
		h.feed(story...) // the standby replays everything
		if got, want := h.state(), `{"incident/7":{"casualties":3},"unit/E7":{"status":"available"}}`; got != want {
			t.Fatalf("state %s, want %s", got, want)
		}
	})
}

func TestStateSurvivesReload(t *testing.T) {
	h := newHarness(t, engine.Options{})
	h.feed(inc("fd", "e1", 1, 1, `"incident_id":7,"casualty_delta":3`), meter("m3", "a", "0.25"))
	e2, err := engine.New(context.Background(), h.store, engine.Options{Routes: []engine.Route{incidentRoute, meterRoute}, Now: func() time.Time { return h.clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	ds, err := e2.Process(context.Background(), []engine.Message{inc("fd", "e1", 1, 1, `"incident_id":7,"casualty_delta":3`), meter("m3", "a", "0.25")})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Outcome != engine.Duplicate {
			t.Fatalf("after reload got %s, want duplicate", d.Outcome)
		}
	}
	if ds[0].Position != 3 {
		t.Fatalf("audit position %d after reload, want 3", ds[0].Position)
	}
}
