package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAChangedKeyDerivationIsNamedInConfigTerms opens a route on a store,
// then the route changed one way or another: each change of what its keys
// derive from is refused, naming the setting's old and new value; a change
// of anything else, or of a path's spelling only, is not.
func TestAChangedKeyDerivationIsNamedInConfigTerms(t *testing.T) {
	base := engine.Route{Name: "meters", Topic: "plant/+/energy", Source: []string{"site", "topic[1]"}, Sequence: "seq", Epoch: "boot",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}
	for _, c := range []struct {
		name   string
		change func(r *engine.Route)
		says   string // "" when accepted
	}{
		{"the source order is a change", func(r *engine.Route) { r.Source = []string{"topic[1]", "site"} }, "source was [site, topic[1]], now [topic[1], site]"},
		{"a source part added is a change", func(r *engine.Route) { r.Source = append(r.Source, "line") }, "source was [site, topic[1]], now [site, topic[1], line]"},
		{"another sequence is a change", func(r *engine.Route) { r.Sequence = "n" }, "sequence was seq, now n"},
		{"an epoch dropped is a change", func(r *engine.Route) { r.Epoch = "" }, "epoch was boot, now none"},
		{"an id instead of a sequence is a change", func(r *engine.Route) { r.Sequence, r.Epoch, r.ID = "", "", "msgId" },
			"sequence was seq, now none; epoch was boot, now none; id was none, now msgId"},
		{"a topic level spelled with a zero is no change", func(r *engine.Route) { r.Source = []string{"site", "topic[01]"} }, ""},
		{"the effects and topic filter are no change", func(r *engine.Route) {
			r.Topic = "plant/#"
			r.Effects = []engine.EffectSpec{{Entity: "site/{site}", Max: map[string]string{"peak": "kwh"}}}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := memory.New()
			defer s.Close()
			e, err := engine.New(t.Context(), s, engine.Options{Routes: []engine.Route{base}})
			if err != nil {
				t.Fatal(err)
			}
			e.Close()
			r := base
			r.Source = append([]string(nil), base.Source...)
			c.change(&r)
			e, err = engine.New(t.Context(), s, engine.Options{Routes: []engine.Route{r}})
			if c.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				e.Close()
				return
			}
			if !errors.Is(err, engine.ErrKeyDerivation) || !strings.Contains(err.Error(), `route "meters": `+c.says+".") {
				t.Fatalf("got %v, want ErrKeyDerivation saying %q", err, c.says)
			}
		})
	}
}
