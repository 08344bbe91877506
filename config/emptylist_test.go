package config

import (
	"slices"
	"testing"
)

// An empty string where a list belongs is refused without the hint a
// word gets ("write [dev] for a list of one"): "write [] for a list of
// one" would name an empty list, which is refused in turn.
func TestAnEmptyStringForAListGetsNoHintOfAnEmptyList(t *testing.T) {
	got := problemsOf(t, "mqtt:\n  brokers: ''\n")
	if want := []string{`mqtt.brokers: want a list, got ""`}; !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q", got, want)
	}
}
