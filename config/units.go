package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written in YAML as a Go duration string:
// "90s", "30m", "1h30m". Bare numbers and negative values are refused.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d without trailing zero units: "2h", "1h30m", "2ms".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var bareNumber = regexp.MustCompile(`^-?[0-9]+(\.[0-9]*)?$`)

// wellFormed is a duration time.ParseDuration reads unless it is too
// large: numbers, each with a unit.
var wellFormed = regexp.MustCompile(`^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// ParseDuration reads a non-negative duration with a unit.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if bareNumber.MatchString(s) {
		return 0, fmt.Errorf("duration %q has no unit: write %ss, %sm or %sh", s, s, s, s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if wellFormed.MatchString(s) { // time.ParseDuration says "invalid" when it overflows too
			return 0, fmt.Errorf("duration %q is beyond the largest, 2562047h (about 292 years)", s)
		}
		if strings.HasSuffix(s, "d") {
			return 0, fmt.Errorf("invalid duration %q: there is no day unit, write hours (24h is a day)", s)
		}
		return 0, fmt.Errorf("invalid duration %q: want a number with a unit (ns, us, ms, s, m, h), like 90s or 1h30m", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return Duration(d), nil
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return typeError(n, "want a duration like 90s or 1h30m, got a %s", kindName(n))
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return typeError(n, "%v", err)
	}
	*d = v
	return nil
}

// ByteSize is a size in bytes written in YAML as an integer or a number with
// a unit: B, kB (1000), MB, GB, KiB (1024), MiB, GiB. Unit letters are not
// case sensitive, so KB is 1000 too; use KiB for 1024.
type ByteSize int64

var byteUnits = []struct {
	name string
	mult int64
}{
	{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"b", 1},
}

// ParseByteSize reads "262144", "256KiB", "1MiB" or "512kB".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	num, mult := t, int64(1)
	lower := strings.ToLower(t)
	for _, u := range byteUnits {
		if strings.HasSuffix(lower, u.name) {
			num, mult = strings.TrimSpace(t[:len(t)-len(u.name)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: want a whole number of bytes, optionally with a unit (B, kB, MB, GB, KiB, MiB, GiB), like 256KiB", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return ByteSize(n * mult), nil
}

// String writes b with the largest binary unit that divides it exactly.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.mult == 0 {
			return strconv.FormatInt(int64(b)/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalYAML writes b as String does.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// UnmarshalYAML reads an integer or a size string.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return typeError(n, "want a size like 256KiB, got a %s", kindName(n))
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return typeError(n, "%v", err)
	}
	*b = v
	return nil
}

// typeError reports a problem the yaml decoder collects instead of stopping
// at, so that every problem in the file is listed.
func typeError(n *yaml.Node, format string, args ...any) error {
	at := fmt.Sprintf("line %d: column %d: ", n.Line, n.Column)
	return &yaml.TypeError{Errors: []string{at + fmt.Sprintf(format, args...)}}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "scalar"
}
