package embedded_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// incidentsRoute is the incident route of the configuration reference:
// casualties added per (agency, source_id, boot_id, sequence).
func incidentsRoute(source ...string) engine.Route {
	return engine.Route{Name: "incidents", Topic: "incidents/#", Source: source, Sequence: "sequence", Epoch: "boot_id",
		Effects: []engine.EffectSpec{{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"}}}}
}

var casualtyReport = engine.Message{Topic: "incidents/fire",
	Payload: []byte(`{"agency":"fd","source_id":"e1","boot_id":1,"sequence":7,"incident_id":"i9","casualty_delta":2}`)}

// decideOnce opens the store in dir, decides msgs with routes, and closes
// both; it returns the engine's open error as it is.
func decideOnce(t *testing.T, dir string, routes []engine.Route, msgs ...engine.Message) ([]engine.Decision, string, error) {
	t.Helper()
	s, err := embedded.Open(dir, embedded.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(t.Context(), s, engine.Options{Routes: routes})
	if err != nil {
		return nil, "", err
	}
	defer e.Close()
	ds, err := e.Process(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	var casualties string
	for _, st := range e.State() {
		if st.Name == "incident/i9" {
			casualties = st.Fields.Get("casualties").Num
		}
	}
	return ds, casualties, nil
}

// TestAReplayAfterSwappingSourceFieldsIsRefused: a restart with a route's
// source fields in another order gives a replay another key and another
// source window, so it would be applied again. The engine is refused
// instead, naming the route and the change.
func TestAReplayAfterSwappingSourceFieldsIsRefused(t *testing.T) {
	dir := t.TempDir()
	ds, casualties, err := decideOnce(t, dir, []engine.Route{incidentsRoute("agency", "source_id")}, casualtyReport)
	if err != nil || ds[0].Outcome != engine.Applied || casualties != "2" {
		t.Fatalf("first delivery: %v, casualties %s, %v", ds, casualties, err)
	}
	ds, casualties, err = decideOnce(t, dir, []engine.Route{incidentsRoute("source_id", "agency")}, casualtyReport)
	if err == nil {
		t.Fatalf("the engine opened with the source fields swapped, and decided the replay %v: casualties %s, want 2", ds[0].Outcome, casualties)
	}
	if !errors.Is(err, engine.ErrKeyDerivation) {
		t.Fatalf("open with the source fields swapped: %v, want ErrKeyDerivation", err)
	}
	for _, part := range []string{`route "incidents"`, "source was [agency, source_id], now [source_id, agency]", "new name"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the refusal does not say %q: %v", part, err)
		}
	}
	// Back to the recorded order, the replay is a duplicate.
	ds, casualties, err = decideOnce(t, dir, []engine.Route{incidentsRoute("agency", "source_id")}, casualtyReport)
	if err != nil || ds[0].Outcome != engine.Duplicate || casualties != "2" {
		t.Fatalf("the replay with the recorded order: %v, casualties %s, %v", ds, casualties, err)
	}
}

// TestAnEffectsOnlyChangeIsAccepted: effects are not part of the key, so a
// restart with an effect added opens, and a replay is still caught.
func TestAnEffectsOnlyChangeIsAccepted(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := decideOnce(t, dir, []engine.Route{incidentsRoute("agency", "source_id")}, casualtyReport); err != nil {
		t.Fatal(err)
	}
	r := incidentsRoute("agency", "source_id")
	r.Effects = append(r.Effects, engine.EffectSpec{Entity: "unit/{source_id}", Set: map[string]string{"incident": "incident_id"}})
	r.Topic = "incidents/+"
	ds, casualties, err := decideOnce(t, dir, []engine.Route{r}, casualtyReport)
	if err != nil {
		t.Fatalf("open with an effect added: %v", err)
	}
	if ds[0].Outcome.Effective() || casualties != "2" {
		t.Fatalf("the replay after an effect was added: %v, casualties %s", ds[0].Outcome, casualties)
	}
}
