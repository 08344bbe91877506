package engine

import (
	"fmt"

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
// exponent). Plain integers, the common case, pass through without parsing
// or copying: text is then lit itself.
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
		if len(lit) > maxDigits+1 {
			return "", false, fmt.Errorf("%.20s… has more than %d digits", lit, maxDigits)
		}
		if lit == "-0" {
			return "0", true, nil
		}
		return lit, true, nil
	}
	var d apd.Decimal
	if _, _, err := d.SetString(lit); err != nil {
		return "", false, fmt.Errorf("bad number %q", lit)
	}
	if d.NumDigits() > maxDigits || d.Exponent > maxExponent || d.Exponent < -maxExponent-maxDigits {
		return "", false, fmt.Errorf("%.20s is out of range (at most %d digits, exponent within ±%d)", lit, maxDigits, maxExponent)
	}
	return formatDecimal(&d), false, nil
}

func formatDecimal(d *apd.Decimal) string {
	var r apd.Decimal
	r.Reduce(d)
	if r.IsZero() {
		return "0"
	}
	return r.Text('f')
}
