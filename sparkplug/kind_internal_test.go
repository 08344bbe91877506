package sparkplug

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestUnwrap8(t *testing.T) {
	cases := []struct {
		name   string
		raw, h int64
		want   int64
		ok     bool
	}{
		{"the next seq follows the highest", 6, 5, 6, true},
		{"a seq already passed is placed below the highest", 3, 5, 3, true},
		{"crossing 255 to 0 moves on to 256", 0, 255, 256, true},
		{"a replay from before the wrap stays below it", 250, 257, 250, true},
		{"127 ahead is ahead", (5 + 127) % 256, 5, 132, true},
		{"127 behind is behind", (300 - 127) % 256, 300, 173, true},
		{"exactly 128 away cannot be placed", (5 + 128) % 256, 5, 0, false},
		{"exactly 128 away after many wraps cannot be placed", (1000 + 128) % 256, 1000, 0, false},
		{"the same seq is the highest itself", 44, 300, 300, true},
		{"behind the start goes negative for the caller to refuse", 250, 3, -6, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := unwrap8(c.raw, c.h)
			if ok != c.ok || (ok && got != c.want) {
				t.Fatalf("unwrap8(%d, %d) = %d, %v; want %d, %v", c.raw, c.h, got, ok, c.want, c.ok)
			}
		})
	}
}

// Any distance under half the ring is recovered exactly from the 8 bits.
func TestUnwrap8Property(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for range 100000 {
		h := rng.Int64N(1 << 40)
		d := rng.Int64N(255) - 127 // -127 … 127
		s := h + d
		if s < 0 {
			continue
		}
		got, ok := unwrap8(s%256, h)
		if !ok || got != s {
			t.Fatalf("seed %d: unwrap8(%d, %d) = %d, %v; want %d", seed, s%256, h, got, ok, s)
		}
		if _, ok := unwrap8((h+128)%256, h); ok {
			t.Fatalf("seed %d: 128 from %d was placed", seed, h)
		}
	}
}

func TestSparkplugEpochOrders(t *testing.T) {
	_, a := epochOf(5, 0)
	_, b := epochOf(5, 1)
	_, c := epochOf(6, 0)
	text, _ := epochOf(5, 1)
	if !(a < b && b < c) || text != "5.1" {
		t.Fatalf("epochs %d %d %d (%q): a rebirth must order after its session's birth and before the next session", a, b, c, text)
	}
}
