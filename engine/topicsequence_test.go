package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestASequenceFromATopicLevel: a route may read its sequence from a
// topic level (meters/m1/42), as the source: its digits are the sequence,
// its window decides a replay, and a level that is not a decimal integer
// is malformed, saying so.
func TestASequenceFromATopicLevel(t *testing.T) {
	ctx := context.Background()
	e, err := engine.New(ctx, memory.New(), engine.Options{Routes: []engine.Route{{Name: "meters", Topic: "meters/+/+",
		Source: []string{"topic[1]"}, Sequence: "topic[2]",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	msg := func(topic string) engine.Message {
		return engine.Message{Topic: topic, Payload: []byte(`{"kwh":0.25}`)}
	}
	ds, err := e.Process(ctx, []engine.Message{msg("meters/m1/41"), msg("meters/m1/42"), msg("meters/m1/41"), msg("meters/m1/4x"), msg("meters/m1/-3")})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []engine.Outcome{engine.Applied, engine.Applied, engine.Duplicate, engine.Malformed, engine.Malformed} {
		if ds[i].Outcome != want {
			t.Fatalf("message %d: %v (%s), want %v", i, ds[i].Outcome, ds[i].Reason, want)
		}
	}
	if ds[1].Sequence != 42 {
		t.Errorf("sequence %d, want 42", ds[1].Sequence)
	}
	if r := ds[3].Reason; !strings.Contains(r, `sequence topic[2] is "4x": a topic level read as a sequence must be a decimal integer`) {
		t.Errorf("reason %q", r)
	}
}
