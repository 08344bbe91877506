package config

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Duration
		text string // String of the result
		err  string
	}{
		{"seconds are read", "90s", 90 * time.Second, "1m30s", ""},
		{"combined units are read", "1h30m", 90 * time.Minute, "1h30m", ""},
		{"whole hours print without zero units", "2h", 2 * time.Hour, "2h", ""},
		{"whole minutes print without zero seconds", "30m", 30 * time.Minute, "30m", ""},
		{"hours and seconds keep the minutes", "1h0m5s", time.Hour + 5*time.Second, "1h0m5s", ""},
		{"milliseconds are read", "2ms", 2 * time.Millisecond, "2ms", ""},
		{"zero with a unit is read", "0s", 0, "0s", ""},
		{"a bare number is refused", "90", 0, "", `duration "90" has no unit: write 90s, 90m or 90h`},
		{"a bare decimal is refused", "1.5", 0, "", `duration "1.5" has no unit: write 1.5s, 1.5m or 1.5h`},
		{"a negative duration is refused", "-1s", 0, "", `duration "-1s" is negative`},
		{"days are refused with a hint", "1d", 0, "", `invalid duration "1d": there is no day unit, write hours (24h is a day)`},
		{"a word is refused", "soon", 0, "", `invalid duration "soon": want a number with a unit (ns, us, ms, s, m, h), like 90s or 1h30m`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseDuration(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("ParseDuration(%q) error %v, want %s", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || d.Std() != tt.want || d.String() != tt.text {
				t.Fatalf("ParseDuration(%q) = %v (%s), %v", tt.in, d.Std(), d, err)
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		text string
		err  string
	}{
		{"a plain number is bytes", "262144", 262144, "256KiB", ""},
		{"KiB is 1024", "256KiB", 262144, "256KiB", ""},
		{"MiB is 1024²", "1MiB", 1 << 20, "1MiB", ""},
		{"GiB is 1024³", "2GiB", 2 << 30, "2GiB", ""},
		{"kB is 1000", "512kB", 512000, "500KiB", ""},
		{"KB is 1000 too", "2KB", 2000, "2000", ""},
		{"MB is 1000²", "1MB", 1000000, "1000000", ""},
		{"B is bytes", "100B", 100, "100", ""},
		{"a space before the unit is allowed", "64 KiB", 65536, "64KiB", ""},
		{"units are not case sensitive", "1mib", 1 << 20, "1MiB", ""},
		{"a fraction is refused", "1.5MiB", 0, "", `invalid size "1.5MiB": want a whole number of bytes, optionally with a unit (B, kB, MB, GB, KiB, MiB, GiB), like 256KiB`},
		{"an unknown unit is refused", "1TB", 0, "", `invalid size "1TB": want a whole number of bytes, optionally with a unit (B, kB, MB, GB, KiB, MiB, GiB), like 256KiB`},
		{"a negative size is refused", "-1KiB", 0, "", `size "-1KiB" is negative`},
		{"an overflowing size is refused", "9223372036854775807GiB", 0, "", `size "9223372036854775807GiB" is too large`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseByteSize(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("ParseByteSize(%q) error %v, want %s", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || int64(b) != tt.want || b.String() != tt.text {
				t.Fatalf("ParseByteSize(%q) = %d (%s), %v", tt.in, b, b, err)
			}
		})
	}
}
