package mqtt

import (
	"math/rand/v2"
	"sync"
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

// reconnects is the backoff between rounds of connection attempts. A
// connection that drops before it has held for stableAfter counts as a
// failed round, so a link that comes up and falls at once (a broker kicking
// the client, two consumers with one client id) backs off instead of
// spinning; one that held starts again from an immediate retry.
type reconnects struct {
	b           backoff
	stableAfter time.Duration

	mu    sync.Mutex
	flaps int
	upAt  time.Time
}

// delay is autopaho's ReconnectBackoff: attempt 0 precedes the first round
// of a reconnection.
func (r *reconnects) delay(attempt int) time.Duration {
	r.mu.Lock()
	n := r.flaps + attempt
	r.mu.Unlock()
	return r.b.delay(n)
}

func (r *reconnects) up(now time.Time) {
	r.mu.Lock()
	r.upAt = now
	r.mu.Unlock()
}

func (r *reconnects) down(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.upAt) >= r.stableAfter {
		r.flaps = 0
	} else {
		r.flaps = min(r.flaps+1, 64)
	}
}
