package engine

import (
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
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

// TestSetNumberIsSetString checks setNumber against apd's SetString on
// texts around its fast path's edges (signs, points, zeros, 18 and 19
// digits) and on random ones: the same form, sign, exponent and
// coefficient, and an error for the same texts.
func TestSetNumberIsSetString(t *testing.T) {
	texts := []string{"0", "-0", "0.0", "-0.0", "-0.00", "00", "007", "-007.50", "0.25", "-229.5", "3", "-3",
		".5", "5.", "-.5", "1.2.3", "1e5", "1E5", "1.5e-3", "+1", "--1", "-", "", ".", "1 ", "Inf", "NaN", "0x10",
		"123456789012345678", "-123456789012345678", "1234567890123456789", "12345678901234567.8",
		"1234567890123456.78", "0.000000000000000001", "0.0000000000000000001", "999999999999999999",
		"9223372036854775807", "-9223372036854775808"}
	_, rng := seeded(t)
	for range 50_000 {
		var b strings.Builder
		if rng.IntN(3) == 0 {
			b.WriteByte('-')
		}
		n := 1 + rng.IntN(22)
		point := -1
		if rng.IntN(2) == 0 {
			point = rng.IntN(n + 1)
		}
		for i := range n {
			if i == point {
				b.WriteByte('.')
			}
			b.WriteByte("0123456789"[rng.IntN(10)])
		}
		texts = append(texts, b.String())
	}
	for _, text := range texts {
		var got, want apd.Decimal
		gotErr := setNumber(&got, text)
		_, _, wantErr := want.SetString(text)
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("%q: setNumber error %v, SetString error %v", text, gotErr, wantErr)
		}
		if wantErr != nil {
			continue
		}
		if got.Form != want.Form || got.Negative != want.Negative || got.Exponent != want.Exponent || got.Coeff.Cmp(&want.Coeff) != 0 {
			t.Fatalf("%q: setNumber gave %v (form %v, negative %v, exponent %d, coefficient %s); SetString %v (%v, %v, %d, %s)",
				text, &got, got.Form, got.Negative, got.Exponent, got.Coeff.String(), &want, want.Form, want.Negative, want.Exponent, want.Coeff.String())
		}
	}
}

func BenchmarkSetNumber(b *testing.B) {
	for _, text := range []string{"0.25", "-229.5", "3", "1.5e-3"} {
		b.Run(text, func(b *testing.B) {
			var d apd.Decimal
			for b.Loop() {
				_ = setNumber(&d, text)
			}
		})
		b.Run(text+"/SetString", func(b *testing.B) {
			var d apd.Decimal
			for b.Loop() {
				_, _, _ = d.SetString(text)
			}
		})
	}
}
