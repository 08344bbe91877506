package consume

import (
	"math/rand/v2"
	"time"
)

// Backoff is capped exponential backoff with jitter: the nth wait (n ≥ 1)
// is drawn from [d/2, d] with d = Min·2^(n-1), capped at Max.
type Backoff struct {
	Min, Max time.Duration
}

// Delay is the wait before attempt n+1; it is 0 for n ≤ 0.
func (b Backoff) Delay(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if half := d / 2; half > 0 {
		d = half + rand.N(d-half+1)
	}
	return d
}

// StableAfter is how long a connection that carried no traffic must hold
// to prove the link (a quiet feed): the reconnect backoff then starts again
// from zero.
const StableAfter = time.Minute

// Proved reports whether a connection that held for held proved the link:
// its drop is then a failover, and the next round over the brokers starts
// at once. It did when it held stableAfter whatever it carried, or when it
// carried the broker's traffic (traffic: a delivery, or a PINGRESP where
// the client library reports one, and no refusal from the broker) and held
// retryMin, the shortest wait. Any other connection is a flap (a broker
// that accepts and drops the client, two consumers with one client id
// taking the session from each other), and the wait before the next round
// grows.
func Proved(held, stableAfter, retryMin time.Duration, traffic bool) bool {
	return held >= stableAfter || (traffic && held >= retryMin)
}

// MaxFlaps bounds a count of connections in a row that proved nothing
// (flaps), which grows a reconnect wait: the wait is capped long before.
const MaxFlaps = 64

// Sleep waits d or until done is closed, and reports whether it waited
// the whole time.
func Sleep(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
