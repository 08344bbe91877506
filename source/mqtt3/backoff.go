package mqtt3

import (
	"math/rand/v2"
	"time"
)

// backoff is capped exponential backoff with jitter: the nth wait (n ≥ 1)
// is drawn from [d/2, d] with d = min·2^(n-1), capped at max.
type backoff struct {
	min, max time.Duration
}

func (b backoff) delay(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := b.min
	for i := 1; i < n && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	if half := d / 2; half > 0 {
		d = half + rand.N(d-half+1)
	}
	return d
}

// maxFlaps bounds the flap count: the wait is capped long before.
const maxFlaps = 64

// proved reports whether a connection that held for held, and delivered
// or not, proved the link: its drop is then a failover, and the next round
// over the brokers starts at once. Any other connection is a flap (a
// broker that accepts and drops the client, two consumers with one client
// id taking the session from each other) and the wait before the next
// round grows. MQTT 3.1.1 has no DISCONNECT from the broker, and paho
// does not report PINGRESPs, so only deliveries and time tell.
func proved(held time.Duration, delivered bool, retryMin time.Duration) bool {
	return held >= stableAfter || (delivered && held >= retryMin)
}
