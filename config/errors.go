package config

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrInvalid is what every *ValidationError matches with errors.Is.
var ErrInvalid = errors.New("invalid configuration")

// ValidationError lists every problem found in a configuration.
type ValidationError struct {
	// File is the name given to Load or Parse; empty when Validate was
	// called on a Config built in code.
	File string
	// Problems are ordered by line, problems without a line first.
	Problems []Problem
	// Partial is the configuration as decoded, with defaults set, when
	// the file was YAML that could be decoded whole: what checks of the
	// machine (files, environment) may still be run on, to list their
	// problems with these. Nil otherwise. It is not a valid
	// configuration: nothing may run on it.
	Partial *Config
}

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Path names the setting, like "routes[0] (incidents).sequence";
	// empty for problems with the file as a whole.
	Path string
	// Message says what is wrong and, where it helps, what to write.
	Message string
	// Line is the 1-based line in the file, 0 when unknown.
	Line int
}

// String formats the problem as "path: message".
func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Error lists each problem on its own line as "file:line: path: message".
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch {
		case e.File != "" && p.Line > 0:
			fmt.Fprintf(&b, "%s:%d: ", e.File, p.Line)
		case e.File != "":
			b.WriteString(e.File + ": ")
		case p.Line > 0:
			fmt.Fprintf(&b, "line %d: ", p.Line)
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// origin tells where settings came from, so problems can name a line or the
// environment variable that set them.
type origin struct {
	lines map[string]int    // setting key ("routes[0].topic") -> line
	env   map[string]string // setting key -> environment variable
}

// field is a setting being checked: key looks lines up, label is shown.
type field struct{ key, label string }

func (f field) dot(name string) field {
	if f.key == "" {
		return field{name, name}
	}
	return field{f.key + "." + name, f.label + "." + name}
}

func (f field) index(i int) field {
	s := fmt.Sprintf("[%d]", i)
	return field{f.key + s, f.label + s}
}

// problems collects every problem found, with the key of the setting each
// one is about.
type problems struct {
	origin origin
	list   []Problem
	keys   []string
}

func (ps *problems) add(f field, format string, args ...any) {
	ps.addProblem(f.key, ps.origin.place(f.key, Problem{Path: f.label, Message: fmt.Sprintf(format, args...)}))
}

// place gives p the line of the setting key, or names the environment
// variable that set it.
func (o origin) place(key string, p Problem) Problem {
	if v, ok := o.envFor(key); ok {
		p.Message += " (set by " + v + ")"
	} else {
		p.Line = o.lineFor(key)
	}
	return p
}

// Place gives a problem found after Load the line of the file that set
// the setting key (like "routes[0].effects[1].sql"), or names the
// environment variable that set it.
func (c *Config) Place(key string, p Problem) Problem {
	return c.origin.place(key, p)
}

// Sets reports whether the file or the environment set key (like
// "outputs.mqtt.password_file") itself, rather than a default filling it
// in.
func (c *Config) Sets(key string) bool {
	_, line := c.origin.lines[key]
	_, env := c.origin.env[key]
	return line || env
}

func (ps *problems) addProblem(key string, p Problem) {
	ps.list = append(ps.list, p)
	ps.keys = append(ps.keys, key)
}

// dropAfter removes the problems from index start on that are about a
// setting at or under the key of a problem before start: a value that could
// not be decoded is reported once, not again for being absent.
func (ps *problems) dropAfter(start int) {
	bad := ps.keys[:start]
	list, keys := ps.list[:start], ps.keys[:start]
	for i := start; i < len(ps.list); i++ {
		if !slices.ContainsFunc(bad, func(b string) bool { return within(ps.keys[i], b) }) {
			list, keys = append(list, ps.list[i]), append(keys, ps.keys[i])
		}
	}
	ps.list, ps.keys = list, keys
}

// reported reports whether a problem was added about f or a setting under
// it (a value that could not be decoded, left empty): a check that reads f
// would report that emptiness again, as another problem.
func (ps *problems) reported(f field) bool {
	return slices.ContainsFunc(ps.keys, func(k string) bool { return within(k, f.key) })
}

// within reports whether key is k or a setting under k.
func within(key, k string) bool {
	rest, ok := strings.CutPrefix(key, k)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

func (ps *problems) err(file string) error {
	if len(ps.list) == 0 {
		return nil
	}
	list := append([]Problem(nil), ps.list...)
	sort.SliceStable(list, func(i, j int) bool { return list[i].Line < list[j].Line })
	return &ValidationError{File: file, Problems: list}
}

// envFor reports the environment variable that set key or one of its
// parents.
func (o origin) envFor(key string) (string, bool) {
	for k := key; k != ""; k = parentKey(k) {
		if v, ok := o.env[k]; ok {
			return v, true
		}
	}
	return "", false
}

// lineFor returns the line of key or of its nearest parent in the file.
func (o origin) lineFor(key string) int {
	for k := key; k != ""; k = parentKey(k) {
		if l, ok := o.lines[k]; ok {
			return l
		}
	}
	return 0
}

// parentKey strips the last ".name" or "[i]" from key.
func parentKey(key string) string {
	i := strings.LastIndexAny(key, ".[")
	if i < 0 {
		return ""
	}
	return key[:i]
}
