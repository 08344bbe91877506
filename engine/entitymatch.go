package engine

import (
	"fmt"
	pathpkg "path"
)

// EntityMatcher says whether an entity's name is one of patterns: the
// name itself, or a pattern of path.Match (meter/m-4* takes meter/m-41
// and meter/m-4, not meter/m-4/phase-a: * stops at a slash). No patterns
// take every entity. A malformed pattern (an unclosed [) is an error
// naming it.
func EntityMatcher(patterns []string) (func(name string) bool, error) {
	for _, p := range patterns {
		if p == "" {
			return nil, fmt.Errorf("an empty entity pattern matches no entity: give a name (incident/7) or a pattern (meter/m-4*)")
		}
		if _, err := pathpkg.Match(p, ""); err != nil {
			return nil, fmt.Errorf("entity pattern %q: %v (a name with [, * or ? in it is matched by escaping them with \\)", p, err)
		}
	}
	return func(name string) bool {
		if len(patterns) == 0 {
			return true
		}
		for _, p := range patterns {
			if ok, _ := pathpkg.Match(p, name); ok || p == name {
				return true
			}
		}
		return false
	}, nil
}
