package config

import (
	"slices"
	"strings"
	"testing"
)

// A duration past Go's largest (about 292 years) is refused saying so:
// "want a number with a unit" sent the reader looking for a missing unit
// in 999999999h.
func TestADurationBeyondTheLargestIsRefusedSayingSo(t *testing.T) {
	got := problemsOf(t, "window:\n  ttl: 999999999h\n")
	want := []string{`window.ttl: duration "999999999h" is beyond the largest, 2562047h (about 292 years)`}
	if !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q", got, want)
	}
	if got := problemsOf(t, "window:\n  ttl: 2562047h\n"); got != nil {
		t.Fatalf("the largest duration: problems %q, want none", got)
	}
}

// Only a duration that is well formed is said to be too large.
func TestAMalformedDurationIsNotSaidToBeTooLarge(t *testing.T) {
	for _, s := range []string{"h", ".h", "1x", "1h2", "abc"} {
		_, err := ParseDuration(s)
		if err == nil || !strings.Contains(err.Error(), "want a number with a unit") {
			t.Errorf("ParseDuration(%q) = %v, want it to ask for a number with a unit", s, err)
		}
	}
}
