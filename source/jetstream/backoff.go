package jetstream

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

// sleep waits d or until done is closed, and reports whether it waited
// the whole time.
func sleep(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
