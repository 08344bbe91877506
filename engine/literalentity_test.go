package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestLiteralEntityNameBounded: an entity named without a placeholder is
// bounded as a rendered one is: a longer name could not be a PostgreSQL
// index entry, and would fail every batch of its route there.
func TestLiteralEntityNameBounded(t *testing.T) {
	route := engine.Route{Name: "units", Topic: "units/#", Source: []string{"unit"}, Sequence: "sequence",
		Effects: []engine.EffectSpec{{Entity: strings.Repeat("e", engine.MaxIdentityBytes+1), Set: map[string]string{"crew": "crew"}}}}
	_, err := engine.New(t.Context(), memory.New(), engine.Options{Routes: []engine.Route{route}})
	if !errors.Is(err, engine.ErrConfig) {
		t.Fatalf("a route whose entity is a literal of %d bytes = %v, want ErrConfig", engine.MaxIdentityBytes+1, err)
	}
}
