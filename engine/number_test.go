package engine

import (
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCanonicalNumberPassesThroughOnlyCanonicalDecimals checks that the
// decimals canonicalNumber passes through unparsed are exactly those that
// parsing and writing again leaves as they are.
func TestCanonicalNumberPassesThroughOnlyCanonicalDecimals(t *testing.T) {
	lits := []string{"0.25", "-0.25", "0.05", "-0.0025", "229.5", "1.5", "1.50", "0.0", "-0.0", "00.5", "01.5",
		"1.", ".5", "-.5", "1.2.3", "1e5", "1.5e-3", "2875", "-", "", "1.5x", "+1.5", "-00.1", "10.01",
		"0.1000000000000000055511151231257827021181583404541015625"}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REPLAYGUARD_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set REPLAYGUARD_SEED to replay)", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for range 20000 {
		f := math.Float64frombits(rng.Uint64())
		if rng.IntN(2) == 0 {
			f = float64(rng.Int64N(2_000_000)-1_000_000) / float64(int64(1)<<rng.IntN(12))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		lits = append(lits, strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(float64(float32(f)), 'g', -1, 32))
	}
	for _, lit := range lits {
		got, integer, err := canonicalNumber(lit)
		want, wantErr := parseDecimal(lit)
		if integer {
			continue // plain integers: their own rule
		}
		if (err != nil) != (wantErr != nil) || got != want {
			t.Fatalf("canonicalNumber(%q) = %q, %v; parsed and written again: %q, %v", lit, got, err, want, wantErr)
		}
	}
}

// TestAPlainIntegerHasAtMostMaxDigitsEitherSign: the bound on an integer's
// digits does not count its sign, so 101 digits are refused with or
// without one, and 100 taken.
func TestAPlainIntegerHasAtMostMaxDigitsEitherSign(t *testing.T) {
	digits := func(n int) string { return "9" + strings.Repeat("0", n-1) }
	for _, tc := range []struct {
		lit string
		ok  bool
	}{
		{digits(maxDigits), true},
		{"-" + digits(maxDigits), true},
		{digits(maxDigits + 1), false},
		{"-" + digits(maxDigits+1), false},
	} {
		if _, _, err := canonicalNumber(tc.lit); (err == nil) != tc.ok {
			t.Errorf("canonicalNumber(%d digits, sign %v) = %v, want ok %v", len(strings.TrimPrefix(tc.lit, "-")), tc.lit[0] == '-', err, tc.ok)
		}
	}
}
