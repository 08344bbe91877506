package mqtt

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	t.Run("no wait before the first attempt", func(t *testing.T) {
		if d := b.delay(0); d != 0 {
			t.Fatalf("delay(0) = %v", d)
		}
	})
	t.Run("waits double up to the cap, jittered down to half", func(t *testing.T) {
		for n, ceil := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
			3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 1000: time.Second} {
			for range 100 {
				if d := b.delay(n); d < ceil/2 || d > ceil {
					t.Fatalf("delay(%d) = %v, want in [%v, %v]", n, d, ceil/2, ceil)
				}
			}
		}
	})
}

func TestReconnects(t *testing.T) {
	r := &reconnects{b: backoff{min: time.Second, max: time.Minute}, stableAfter: time.Minute}
	now := time.Unix(1000, 0)
	t.Run("the first connection is attempted at once", func(t *testing.T) {
		if d := r.delay(0); d != 0 {
			t.Fatalf("delay = %v", d)
		}
	})
	t.Run("a connection that falls at once backs off before the next round", func(t *testing.T) {
		r.up(now)
		r.down(now.Add(time.Second))
		r.up(now.Add(2 * time.Second))
		r.down(now.Add(3 * time.Second))
		if d := r.delay(0); d < time.Second || d > 2*time.Second {
			t.Fatalf("delay after two flaps = %v, want in [1s, 2s]", d)
		}
	})
	t.Run("a connection that held reconnects at once", func(t *testing.T) {
		r.up(now.Add(10 * time.Second))
		r.down(now.Add(10*time.Second + time.Minute))
		if d := r.delay(0); d != 0 {
			t.Fatalf("delay = %v", d)
		}
	})
}
