package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Errors returned by ParsePath, ParseTemplate and ValidateTopicFilter.
var (
	ErrPath        = errors.New("invalid path")
	ErrTemplate    = errors.New("invalid entity template")
	ErrTopicFilter = errors.New("invalid topic filter")
)

// Path locates a value in a message: a topic level (topic[N], counted from 0)
// or a field of the JSON payload reached through nested objects (a.b.c).
type Path struct {
	// Topic is true for topic[Level], false for a payload path.
	Topic bool
	// Level is the topic level index when Topic is true.
	Level int
	// Segments are the payload path's object keys, outermost first.
	Segments []string
}

// String returns the path as written in the configuration.
func (p Path) String() string {
	if p.Topic {
		return "topic[" + strconv.Itoa(p.Level) + "]"
	}
	return strings.Join(p.Segments, ".")
}

// ParsePath reads "topic[N]" (N >= 0) or a dotted payload path whose segments
// are non-empty and contain no brackets or braces.
func ParsePath(p string) (Path, error) {
	if p == "" {
		return Path{}, fmt.Errorf("%w: empty", ErrPath)
	}
	if rest, ok := strings.CutPrefix(p, "topic["); ok {
		return parseTopicLevel(p, rest)
	}
	segs := strings.Split(p, ".")
	for _, s := range segs {
		if s == "" {
			return Path{}, fmt.Errorf("%w: %q has an empty segment: write dotted names like a.b.c", ErrPath, p)
		}
		if strings.ContainsAny(s, "[]{}") {
			return Path{}, fmt.Errorf("%w: %q: only topic[N] uses brackets; payload paths are dotted names like a.b.c", ErrPath, p)
		}
	}
	return Path{Segments: segs}, nil
}

func parseTopicLevel(p, rest string) (Path, error) {
	num, ok := strings.CutSuffix(rest, "]")
	if !ok || strings.ContainsAny(num, "[]") {
		return Path{}, fmt.Errorf("%w: %q: write topic[N] with nothing after the bracket", ErrPath, p)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || num != strconv.Itoa(n) {
		return Path{}, fmt.Errorf("%w: %q: the level in topic[N] is a whole number from 0, like topic[1]", ErrPath, p)
	}
	return Path{Topic: true, Level: n}, nil
}

// TemplatePart is a literal or a placeholder of a Template.
type TemplatePart struct {
	// Literal is copied as is when Path is nil.
	Literal string
	// Path is the value substituted for a {path} placeholder.
	Path *Path
}

// Template is an entity name with {path} placeholders, like
// "meter/{topic[1]}" or "incident/{incident_id}".
type Template struct {
	Parts []TemplatePart
}

// String returns the template as written in the configuration.
func (t Template) String() string {
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Path != nil {
			b.WriteString("{" + p.Path.String() + "}")
		} else {
			b.WriteString(p.Literal)
		}
	}
	return b.String()
}

// Paths returns the template's placeholders in order.
func (t Template) Paths() []Path {
	var ps []Path
	for _, p := range t.Parts {
		if p.Path != nil {
			ps = append(ps, *p.Path)
		}
	}
	return ps
}

// ParseTemplate reads an entity template: literal text with balanced,
// non-empty {path} placeholders, each a valid path. There is no escape for
// literal braces.
func ParseTemplate(t string) (Template, error) {
	if t == "" {
		return Template{}, fmt.Errorf("%w: empty", ErrTemplate)
	}
	var tpl Template
	rest := t
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			tpl.Parts = append(tpl.Parts, TemplatePart{Literal: rest})
			break
		}
		if rest[open] == '}' {
			return Template{}, fmt.Errorf("%w: %q: '}' without '{'", ErrTemplate, t)
		}
		if open > 0 {
			tpl.Parts = append(tpl.Parts, TemplatePart{Literal: rest[:open]})
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] == '{' {
			return Template{}, fmt.Errorf("%w: %q: '{' without a matching '}'", ErrTemplate, t)
		}
		inner := rest[open+1 : open+1+end]
		if inner == "" {
			return Template{}, fmt.Errorf("%w: %q: empty placeholder {}", ErrTemplate, t)
		}
		p, err := ParsePath(inner)
		if err != nil {
			return Template{}, fmt.Errorf("%w: %q: placeholder {%s}: %w", ErrTemplate, t, inner, err)
		}
		tpl.Parts = append(tpl.Parts, TemplatePart{Path: &p})
		rest = rest[open+end+2:]
	}
	return tpl, nil
}

// ValidateTopicFilter checks an MQTT topic filter: not empty, valid UTF-8
// without NUL, at most 65535 bytes, '+' alone in its level, '#' alone in the
// last level.
func ValidateTopicFilter(f string) error {
	switch {
	case f == "":
		return fmt.Errorf("%w: empty", ErrTopicFilter)
	case len(f) > 65535:
		return fmt.Errorf("%w: longer than 65535 bytes", ErrTopicFilter)
	case !utf8.ValidString(f):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrTopicFilter, f)
	case strings.ContainsRune(f, 0):
		return fmt.Errorf("%w: %q contains a NUL character", ErrTopicFilter, f)
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return fmt.Errorf("%w: %q: '#' must be alone in the last level, like a/b/#", ErrTopicFilter, f)
		}
		if strings.Contains(l, "+") && l != "+" {
			return fmt.Errorf("%w: %q: '+' must be alone in its level, like a/+/c", ErrTopicFilter, f)
		}
	}
	return nil
}

// filterLevels returns how many levels a topic matching filter f has for
// sure, and whether it may have more (f ends in '#').
func filterLevels(f string) (n int, open bool) {
	levels := strings.Split(f, "/")
	if levels[len(levels)-1] == "#" {
		return len(levels) - 1, true
	}
	return len(levels), false
}

// filterCovers reports whether every topic that valid filter later matches
// is matched by valid filter earlier too (MQTT rules: '#' also matches the
// parent level; a filter starting with a wildcard matches no topic starting
// with '$').
func filterCovers(earlier, later string) bool {
	e, l := strings.Split(earlier, "/"), strings.Split(later, "/")
	if (e[0] == "+" || e[0] == "#") && strings.HasPrefix(l[0], "$") {
		return false
	}
	for i, el := range e {
		switch {
		case el == "#":
			return true
		case i == len(l) || l[i] == "#":
			return false
		case el != "+" && el != l[i]:
			return false // a literal level covers only itself, not '+'
		}
	}
	return len(l) == len(e)
}
