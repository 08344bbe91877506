package httpretry

import (
	"testing"
	"time"
)

func TestRetryAfterReadsSecondsAndDates(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"30":                            30 * time.Second,
		"Fri, 04 Dec 2026 12:01:30 GMT": 90 * time.Second,
		"Fri, 04 Dec 2026 11:59:00 GMT": 0, // past
		"-5":                            0,
		"soon":                          0,
	} {
		if got := parse(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}
