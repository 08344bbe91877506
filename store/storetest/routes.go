package storetest

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// The cases of the routes' key derivations (engine.RouteRecorder): a
// store records each route's the first time and keeps it, and an engine
// whose route derives keys another way is refused before it decides a
// replay again.

func recorder(t *testing.T, h *handle) engine.RouteRecorder {
	t.Helper()
	if h.caps.Routes == nil {
		t.Fatalf("%T declares no Capabilities.Routes", h.Store)
	}
	return h.caps.Routes
}

func recordRoutes(t *testing.T, h *handle, want map[string]string) map[string]string {
	t.Helper()
	in := map[string][]byte{}
	for name, d := range want {
		in[name] = []byte(d)
	}
	got, err := recorder(t, h).RecordRoutes(t.Context(), in)
	if err != nil {
		t.Fatalf("RecordRoutes: %v", err)
	}
	out := map[string]string{}
	for name, d := range got {
		out[name] = string(d)
	}
	return out
}

func testRoutesRecordedOnce(t *testing.T, p *place) {
	h := p.first(t)
	want := map[string]string{"incidents": `{"kind":"json","source":["agency","unit"]}`, "a|b": "x"}
	if got := recordRoutes(t, h, want); !maps.Equal(got, want) {
		t.Fatalf("first record: got %v, want %v", got, want)
	}
	// A recorded derivation stays; a new route is added; one not named is
	// left alone.
	got := recordRoutes(t, h, map[string]string{"incidents": `{"kind":"json","source":["unit","agency"]}`, "meters": "m"})
	if want := map[string]string{"incidents": want["incidents"], "meters": "m"}; !maps.Equal(got, want) {
		t.Fatalf("second record: got %v, want %v", got, want)
	}
	if p.f.Durable {
		h = p.reopen(t, h)
	}
	got = recordRoutes(t, h, map[string]string{"a|b": "y", "meters": "n", "incidents": "z"})
	if want := map[string]string{"a|b": "x", "meters": "m", "incidents": want["incidents"]}; !maps.Equal(got, want) {
		t.Fatalf("after reopening: got %v, want %v", got, want)
	}
	// Reading the records records nothing: a name without one stays
	// without one.
	rr, ok := h.Store.(engine.RouteRecords)
	if !ok {
		t.Fatalf("%T records routes but cannot read them without recording (engine.RouteRecords)", h.Store)
	}
	for range 2 {
		read, err := rr.RecordedRoutes(t.Context(), []string{"meters", "unrecorded", "a|b"})
		if err != nil {
			t.Fatalf("RecordedRoutes: %v", err)
		}
		if got := maps.Collect(func(yield func(string, string) bool) {
			for k, v := range read {
				yield(k, string(v))
			}
		}); !maps.Equal(got, map[string]string{"meters": "m", "a|b": "x"}) {
			t.Fatalf("RecordedRoutes: got %v, want meters and a|b only", got)
		}
	}
}

// swapped is routes with the incidents route's source parts in the other
// order: another key and source window for each of its messages.
func swapped(routes []engine.Route) []engine.Route {
	out := slices.Clone(routes)
	out[0].Source = []string{out[0].Source[1], out[0].Source[0]}
	return out
}

// newEngineWith opens an engine with routes on h; its error is returned.
func newEngineWith(t *testing.T, h *handle, routes []engine.Route) (*engine.Engine, error) {
	t.Helper()
	e, err := engine.New(t.Context(), h.Store, engine.Options{Routes: routes, TTL: time.Hour})
	if err == nil {
		t.Cleanup(func() { e.Close() })
	}
	return e, err
}

// refusedOrAppliedTwice checks that an engine with the incidents route's
// source parts swapped is refused, naming the route and the change; were
// it not, it decides the replay of incident(1, 2) on it and fails the
// test with the casualties it counted.
func refusedOrAppliedTwice(t *testing.T, h *handle) {
	t.Helper()
	e, err := newEngineWith(t, h, swapped(sharedRoutes))
	if err == nil {
		ds := mustProcess(t, e, incident(1, 2))
		t.Fatalf("an engine whose route swapped its source fields opened, and decided the replay of an applied message %v: casualties %s, want 2",
			ds[0].Outcome, groupField(t, e, "incident/7", "casualties"))
	}
	if !errors.Is(err, engine.ErrKeyDerivation) {
		t.Fatalf("open with the source fields swapped: %v, want ErrKeyDerivation", err)
	}
	for _, part := range []string{`route "incidents"`, "source was [agency, unit], now [unit, agency]", "new name"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the refusal does not say %q: %v", part, err)
		}
	}
}

func testRoutesChangedRefused(t *testing.T, p *place) {
	h := p.first(t)
	e, err := newEngineWith(t, h, sharedRoutes)
	if err != nil {
		t.Fatal(err)
	}
	if ds := mustProcess(t, e, incident(1, 2)); ds[0].Outcome != engine.Applied {
		t.Fatalf("first delivery: %v", ds[0].Outcome)
	}
	e.Close()
	if p.f.Durable {
		h = p.reopen(t, h)
	}
	refusedOrAppliedTwice(t, h)
	// An effect changed, a route added: the keys are the same, and the
	// replay is still a duplicate.
	changed := slices.Clone(sharedRoutes)
	changed[0].Effects = append(slices.Clone(changed[0].Effects), engine.EffectSpec{Entity: "unit/{unit}", Set: map[string]string{"incident": "incident"}})
	changed = append(changed, engine.Route{Name: "counters", Topic: "counters/+", Source: []string{"topic[1]"}, ID: "id",
		Effects: []engine.EffectSpec{{Entity: "counter/{topic[1]}", Add: map[string]string{"n": "n"}}}})
	e, err = newEngineWith(t, h, changed)
	if err != nil {
		t.Fatalf("open with an effect and a route added: %v", err)
	}
	if ds := mustProcess(t, e, incident(1, 2)); ds[0].Outcome == engine.Applied || ds[0].Outcome == engine.AppliedLate {
		t.Fatalf("the replay after an effect was added: %v", ds[0].Outcome)
	}
	if got := groupField(t, e, "incident/7", "casualties"); got != "2" {
		t.Fatalf("casualties %s, want 2", got)
	}
	e.Close()
	// A route removed is accepted; the added one is recorded: changing it
	// now is refused.
	recounted := slices.Clone(changed[2:])
	recounted[0].ID = "seq_id"
	if _, err := newEngineWith(t, h, recounted); !errors.Is(err, engine.ErrKeyDerivation) || !strings.Contains(err.Error(), "id was id, now seq_id") {
		t.Fatalf("open with the new route's id changed: %v, want ErrKeyDerivation naming the id", err)
	}
	if _, err := newEngineWith(t, h, sharedRoutes[1:]); err != nil {
		t.Fatalf("open with a route removed: %v", err)
	}
}

func testRoutesMemberRefused(t *testing.T, p *place) {
	m1, m2 := p.handle(t, "m1"), p.handle(t, "m2")
	e1, err := newEngineWith(t, m1, sharedRoutes)
	if err != nil {
		t.Fatal(err)
	}
	if ds := mustProcess(t, e1, incident(1, 2)); ds[0].Outcome != engine.Applied {
		t.Fatalf("first delivery: %v", ds[0].Outcome)
	}
	refusedOrAppliedTwice(t, m2)
	// m1 goes on; m2 with the group's derivation joins it, and the replay
	// is a duplicate there.
	if ds := mustProcess(t, e1, incident(2, 3)); ds[0].Outcome != engine.Applied {
		t.Fatalf("m1's next delivery after m2 was refused: %v", ds[0].Outcome)
	}
	e2, err := newEngineWith(t, m2, sharedRoutes)
	if err != nil {
		t.Fatalf("m2 with the group's routes: %v", err)
	}
	if ds := mustProcess(t, e2, incident(1, 2)); ds[0].Outcome != engine.Duplicate {
		t.Fatalf("the replay at m2: %v, want duplicate", ds[0].Outcome)
	}
	if got := groupField(t, e1, "incident/7", "casualties"); got != "5" {
		t.Fatalf("casualties %s, want 5", got)
	}
}
