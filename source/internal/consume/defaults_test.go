package consume

import (
	"log/slog"
	"testing"
	"time"

	"github.com/replayguard/replayguard/source"
)

func TestDefaults(t *testing.T) {
	t.Run("a zero setting takes the default, a set one stays", func(t *testing.T) {
		zero, set := 0, 7
		Default(&zero, 256)
		Default(&set, 256)
		if zero != 256 || set != 7 {
			t.Fatalf("got %d and %d, want 256 and 7", zero, set)
		}
	})
	t.Run("a retry maximum defaults to no less than its minimum", func(t *testing.T) {
		for _, c := range []struct{ lo, hi, wantLo, wantHi time.Duration }{
			{0, 0, time.Second, 10 * time.Second},
			{time.Minute, 0, time.Minute, time.Minute},
			{0, 2 * time.Second, time.Second, 2 * time.Second},
		} {
			lo, hi := c.lo, c.hi
			DefaultRetry(&lo, &hi, time.Second, 10*time.Second)
			if lo != c.wantLo || hi != c.wantHi {
				t.Errorf("(%v, %v) became (%v, %v), want (%v, %v)", c.lo, c.hi, lo, hi, c.wantLo, c.wantHi)
			}
		}
	})
	t.Run("nil sinks discard, set ones stay", func(t *testing.T) {
		var log *slog.Logger
		var obs source.Observer
		DefaultSinks(&log, &obs)
		if log == nil || obs == nil {
			t.Fatal("a sink is still nil")
		}
		obs.Observe(source.Event{Kind: source.Received})
		mine := slog.Default()
		DefaultSinks(&mine, &obs)
		if mine != slog.Default() {
			t.Fatal("a set logger was replaced")
		}
	})
}
