// Package httpretry reads an HTTP receiver's request for a pause: the
// Retry-After header of a 429 or 503 answer (RFC 9110, section 10.2.3),
// and makes a retry loop wait for it.
package httpretry

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Max bounds the pause a receiver's Retry-After makes a retry loop take:
// what it delivers waits meanwhile.
const Max = 10 * time.Minute

// Error is a failed request whose receiver asked for a pause.
type Error struct {
	After time.Duration
	Err   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v (the receiver asks to retry after %v)", e.Err, e.After)
}

func (e *Error) Unwrap() error { return e.Err }

// Wrap is err with the pause resp asks for, or err when it asks for none.
func Wrap(err error, resp *http.Response, now time.Time) error {
	if after := After(resp, now); after > 0 {
		return &Error{After: after, Err: err}
	}
	return err
}

// Wait is how long a retry loop whose backoff says wait waits after err:
// longer when err, or an error it wraps, is an Error asking for more, up
// to Max.
func Wait(err error, wait time.Duration) time.Duration {
	if e := (*Error)(nil); errors.As(err, &e) {
		return max(wait, min(e.After, Max))
	}
	return wait
}

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
