package engine

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// decimalCtx does exact decimal arithmetic: sums of meter readings must not
// round. 0.1 + 0.2 is 0.3.
var decimalCtx = apd.Context{
	Precision:   0, // no rounding: exact sums of inputs bounded by maxDigits and maxExponent
	MaxExponent: apd.MaxExponent,
	MinExponent: apd.MinExponent,
	Traps:       apd.DefaultTraps | apd.Inexact | apd.Rounded,
}

// Bounds on a JSON number the engine reads: past them a message is
// malformed. They keep canonical text, keys and exact sums small: a sum of
// inputs within them never needs more than a few thousand digits.
const (
	maxDigits   = 100
	maxExponent = 1000
)

// canonicalNumber returns the canonical decimal text of a JSON number
// literal: "1.50", "15e-1" and "1.5" all become "1.5". integer reports
// whether the literal itself was written as an integer (no fraction, no
// exponent). Plain integers and decimals already in canonical form, the
// common cases, pass through without parsing or copying: text is then lit
// itself.
func canonicalNumber(lit string) (text string, integer bool, err error) {
	plain := len(lit) > 0
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if (c < '0' || c > '9') && !(i == 0 && c == '-' && len(lit) > 1) {
			plain = false
			break
		}
	}
	if plain {
		if digits := len(lit) - strings.Count(lit[:1], "-"); digits > maxDigits {
			return "", false, fmt.Errorf("%.20s… has more than %d digits", lit, maxDigits)
		}
		if lit == "-0" {
			return "0", true, nil
		}
		return lit, true, nil
	}
	if plainDecimal(lit) {
		return lit, false, nil
	}
	text, err = parseDecimal(lit)
	return text, false, err
}

// parseDecimal is canonicalNumber's general case: any other literal, parsed
// and written again.
func parseDecimal(lit string) (string, error) {
	var d apd.Decimal
	if _, _, err := d.SetString(lit); err != nil {
		return "", fmt.Errorf("bad number %q", lit)
	}
	if d.NumDigits() > maxDigits || d.Exponent > maxExponent || d.Exponent < -maxExponent-maxDigits {
		return "", fmt.Errorf("%.20s is out of range (at most %d digits, exponent within ±%d)", lit, maxDigits, maxExponent)
	}
	return formatDecimal(&d), nil
}

// plainDecimal reports whether lit is already the canonical text of a
// number with a fraction: an optional '-', an integer part without a
// leading zero (or "0"), a '.', and digits that do not end in '0', within
// maxDigits characters (so within the digit and exponent bounds). Floats in
// their shortest round-trip form mostly are: "0.25", "-229.5".
func plainDecimal(lit string) bool {
	if len(lit) > maxDigits {
		return false
	}
	s := lit
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	dot := strings.IndexByte(s, '.')
	if dot < 1 || dot == len(s)-1 || s[len(s)-1] == '0' || (s[0] == '0' && dot > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && i != dot {
			return false
		}
	}
	return true
}

func formatDecimal(d *apd.Decimal) string {
	var r apd.Decimal
	r.Reduce(d)
	if r.IsZero() {
		return "0"
	}
	return r.Text('f')
}

// setNumber sets d to the number text, exactly as d.SetString does. Text
// of up to 18 digits with an optional '-' and fraction, as nearly every
// reading's is ("0.25", "-229.5", "3"), is read into the coefficient
// directly: SetString lowers, cuts and copies the text and parses a big
// integer, half a microsecond for each add of a meter's reading (0.37 s of
// the 5.9 s of CPU that a million readings of 50 meters took).
func setNumber(d *apd.Decimal, text string) error {
	if coeff, exp, ok := smallDecimal(text); ok {
		d.SetFinite(coeff, exp)
		return nil
	}
	_, _, err := d.SetString(text)
	return err
}

// smallDecimal reads text of the form -?\d+(\.\d+)? with at most 18
// digits as a coefficient and an exponent; false for any other text, and
// for a negative zero, which SetFinite cannot make.
func smallDecimal(text string) (coeff int64, exp int32, ok bool) {
	s, neg := strings.CutPrefix(text, "-")
	digits, point := 0, -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9' && digits < 18:
			coeff, digits = 10*coeff+int64(c-'0'), digits+1
		case c == '.' && point < 0 && i > 0 && i < len(s)-1:
			point = i
		default:
			return 0, 0, false
		}
	}
	if digits == 0 || neg && coeff == 0 {
		return 0, 0, false
	}
	if point >= 0 {
		exp = -int32(len(s) - point - 1)
	}
	if neg {
		coeff = -coeff
	}
	return coeff, exp, true
}
