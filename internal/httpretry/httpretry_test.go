package httpretry

import (
	"errors"
	"fmt"
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

func TestWaitTakesTheLongerPauseUpToMax(t *testing.T) {
	asked := fmt.Errorf("export: %w", &Error{After: 2 * time.Second, Err: errors.New("503")})
	for _, c := range []struct {
		err        error
		wait, want time.Duration
	}{
		{errors.New("503"), time.Second, time.Second},
		{asked, time.Second, 2 * time.Second},
		{asked, 3 * time.Second, 3 * time.Second},
		{errors.Join(errors.New("other chain"), &Error{After: time.Hour}), time.Second, Max},
	} {
		if got := Wait(c.err, c.wait); got != c.want {
			t.Errorf("Wait(%v, %v) = %v, want %v", c.err, c.wait, got, c.want)
		}
	}
}
