package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

func TestAnEntityPatternLongerThanAnyNameOrTooManyWildcardsIsRefused(t *testing.T) {
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("meter/m-%d*", i)
	}
	names := make([]string, 5000)
	for i := range names {
		names[i] = fmt.Sprintf("meter/m-%d", i)
	}
	for _, tc := range []struct {
		name     string
		patterns []string
		want     string // "" when taken
	}{
		{"a 100 kB pattern of stars is refused", []string{strings.Repeat("?*", 50000)}, "is 100000 bytes, over 2048"},
		{"a pattern just over the bound is refused", []string{strings.Repeat("a", 2049)}, "is 2049 bytes, over 2048"},
		{"the longest name with each byte escaped is taken", []string{strings.Repeat(`\a`, 1024)}, ""},
		{"65 wildcard patterns are refused", many, "65 entity patterns with wildcards, over 64"},
		{"5000 plain names are taken", names, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := engine.EntityMatcher(tc.patterns)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 300):
				t.Fatalf("error %.300v, want one short, saying %q", err, tc.want)
			}
		})
	}
	match, err := engine.EntityMatcher(append(names, "incident/*", `a\*b`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"meter/m-4999": true, "meter/m-5000": false, "incident/7": true, "incident/7/x": false, "a*b": true, `a\*b`: true, "ab": false} {
		if match(name) != want {
			t.Errorf("match(%q) = %v, want %v", name, !want, want)
		}
	}
}
