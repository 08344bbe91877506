package engine

import (
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// decimalCtx does exact decimal arithmetic: sums of meter readings must not
// round. 0.1 + 0.2 is 0.3.
var decimalCtx = apd.Context{
	Precision:   200,
	MaxExponent: apd.MaxExponent,
	MinExponent: apd.MinExponent,
	Traps:       apd.DefaultTraps | apd.Inexact | apd.Rounded,
}

// canonicalNumber returns the canonical decimal text of a JSON number
// literal: "1.50", "15e-1" and "1.5" all become "1.5". Plain integers, the
// common case, pass through without parsing.
func canonicalNumber(lit []byte) (string, error) {
	plain := len(lit) > 0
	for i, c := range lit {
		if (c < '0' || c > '9') && !(i == 0 && c == '-' && len(lit) > 1) {
			plain = false
			break
		}
	}
	if plain {
		if string(lit) == "-0" {
			return "0", nil
		}
		return string(lit), nil
	}
	var d apd.Decimal
	if _, _, err := d.SetString(string(lit)); err != nil {
		return "", fmt.Errorf("bad number %q", lit)
	}
	return formatDecimal(&d), nil
}

func formatDecimal(d *apd.Decimal) string {
	var r apd.Decimal
	r.Reduce(d)
	if r.IsZero() {
		return "0"
	}
	return r.Text('f')
}

// parseDecimal parses canonical decimal text.
func parseDecimal(s string) (*apd.Decimal, error) {
	d, _, err := apd.NewFromString(s)
	return d, err
}
