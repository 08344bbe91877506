package consume

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	t.Run("no wait before the first attempt", func(t *testing.T) {
		if d := b.Delay(0); d != 0 {
			t.Fatalf("Delay(0) = %v", d)
		}
	})
	t.Run("waits double up to the cap, jittered down to half", func(t *testing.T) {
		for n, ceil := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
			3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 1000: time.Second} {
			for range 100 {
				if d := b.Delay(n); d < ceil/2 || d > ceil {
					t.Fatalf("Delay(%d) = %v, want in [%v, %v]", n, d, ceil/2, ceil)
				}
			}
		}
	})
	t.Run("waits are jittered, not one fixed value", func(t *testing.T) {
		seen := map[time.Duration]bool{}
		for range 100 {
			seen[b.Delay(3)] = true
		}
		if len(seen) < 10 {
			t.Fatalf("100 waits took %d distinct values", len(seen))
		}
	})
}

func TestSleep(t *testing.T) {
	t.Run("waits the whole time when nothing stops it", func(t *testing.T) {
		if !Sleep(make(chan struct{}), time.Millisecond) {
			t.Fatal("Sleep reported an early end")
		}
	})
	t.Run("ends early when done is closed", func(t *testing.T) {
		done := make(chan struct{})
		close(done)
		if Sleep(done, time.Hour) {
			t.Fatal("Sleep waited through a closed done")
		}
	})
}

func TestProved(t *testing.T) {
	const stable, retryMin = time.Minute, 250 * time.Millisecond
	for _, c := range []struct {
		name    string
		held    time.Duration
		traffic bool
		want    bool
	}{
		{"a connection that held stableAfter proved the link whatever it carried", stable, false, true},
		{"a connection with traffic that held the shortest wait proved the link", retryMin, true, true},
		{"a connection with traffic shorter than the shortest wait is a flap", retryMin - 1, true, false},
		{"a connection without traffic shorter than stableAfter is a flap", stable - 1, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Proved(c.held, stable, retryMin, c.traffic); got != c.want {
				t.Fatalf("Proved(%v, traffic %v) = %v, want %v", c.held, c.traffic, got, c.want)
			}
		})
	}
}
