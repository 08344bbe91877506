// Package httpretry reads an HTTP receiver's request for a pause: the
// Retry-After header of a 429 or 503 answer (RFC 9110, section 10.2.3).
package httpretry

import (
	"net/http"
	"strconv"
	"time"
)

// After is the pause resp asks for: its Retry-After, in seconds or as a
// date, when its status is 429 or 503; 0 when it asks for none, or for
// one that is unreadable or past.
func After(resp *http.Response, now time.Time) time.Duration {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0
	}
	return parse(resp.Header.Get("Retry-After"), now)
}

func parse(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
