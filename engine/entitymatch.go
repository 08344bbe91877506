package engine

import (
	"fmt"
	pathpkg "path"
	"strings"
)

// The bounds of EntityMatcher's patterns. A pattern is matched against
// every entity, a fleet's million: its cost per entity grows with its
// length, so a longer one than any entity name needs (every byte of the
// longest name escaped) is refused, as are more wildcard patterns than a
// review asks for. Plain names cost a lookup each and are not counted.
const (
	MaxEntityPatternBytes = 2 * maxIdentityBytes
	MaxEntityPatterns     = 64
)

// EntityMatcher says whether an entity's name is one of patterns: the
// name itself, or a pattern of path.Match (meter/m-4* takes meter/m-41
// and meter/m-4, not meter/m-4/phase-a: * stops at a slash). No patterns
// take every entity. A malformed pattern (an unclosed [), an empty one, one
// over MaxEntityPatternBytes, or more than MaxEntityPatterns with a
// wildcard, is an error naming it.
func EntityMatcher(patterns []string) (func(name string) bool, error) {
	names := make(map[string]bool)
	var wild []string
	for _, p := range patterns {
		switch {
		case p == "":
			return nil, fmt.Errorf("an empty entity pattern matches no entity: give a name (incident/7) or a pattern (meter/m-4*)")
		case len(p) > MaxEntityPatternBytes:
			return nil, fmt.Errorf("entity pattern %.40q... is %d bytes, over %d: no entity name is over %d bytes, even with each byte escaped",
				p, len(p), MaxEntityPatternBytes, maxIdentityBytes)
		case !strings.ContainsAny(p, `*?[\`):
			names[p] = true
			continue
		}
		if _, err := pathpkg.Match(p, ""); err != nil {
			return nil, fmt.Errorf("entity pattern %q: %v (a name with [, * or ? in it is matched by escaping them with \\)", p, err)
		}
		names[p] = true // a name with a wildcard in it is taken as itself too
		wild = append(wild, p)
	}
	if len(wild) > MaxEntityPatterns {
		return nil, fmt.Errorf("%d entity patterns with wildcards, over %d: each is tried on every entity; give names, or fewer, wider patterns", len(wild), MaxEntityPatterns)
	}
	return func(name string) bool {
		if len(patterns) == 0 || names[name] {
			return true
		}
		for _, p := range wild {
			if ok, _ := pathpkg.Match(p, name); ok {
				return true
			}
		}
		return false
	}, nil
}
