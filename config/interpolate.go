package config

import (
	"fmt"
	"regexp"
	"strings"
)

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// interpolate expands ${VAR} and ${VAR:-default} in text and turns $$ into a
// literal $. A default is used when VAR is unset or empty. Full-line comments
// are copied untouched. It returns every problem found, with its line.
func interpolate(text string, getenv func(string) (string, bool)) (string, []Problem) {
	var out strings.Builder
	var probs []Problem
	for i, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			out.WriteString(line)
			continue
		}
		expanded, msgs := expandLine(line, getenv)
		out.WriteString(expanded)
		for _, m := range msgs {
			probs = append(probs, Problem{Message: m, Line: i + 1})
		}
	}
	return out.String(), probs
}

func expandLine(line string, getenv func(string) (string, bool)) (string, []string) {
	var b strings.Builder
	var msgs []string
	for {
		i := strings.IndexByte(line, '$')
		if i < 0 || i == len(line)-1 {
			b.WriteString(line)
			return b.String(), msgs
		}
		b.WriteString(line[:i])
		switch line[i+1] {
		case '$':
			b.WriteByte('$')
			line = line[i+2:]
			continue
		case '{':
		default:
			b.WriteByte('$')
			line = line[i+1:]
			continue
		}
		end := strings.IndexByte(line[i:], '}')
		if end < 0 {
			msgs = append(msgs, "unterminated ${: close it with } (write $$ for a literal $)")
			b.WriteString(line[i:])
			return b.String(), msgs
		}
		ref := line[i : i+end+1]
		v, msg := lookupVar(ref[2:len(ref)-1], getenv)
		if msg != "" {
			msgs = append(msgs, ref+": "+msg)
		}
		b.WriteString(v)
		line = line[i+end+1:]
	}
}

// lookupVar resolves the inside of ${...}, or says what is wrong with it.
func lookupVar(inner string, getenv func(string) (string, bool)) (string, string) {
	name, def, hasDef := strings.Cut(inner, ":-")
	if !varName.MatchString(name) {
		return "", fmt.Sprintf("%q is not a variable name: write ${NAME} or ${NAME:-default} (and $$ for a literal $)", name)
	}
	v, ok := getenv(name)
	switch {
	case hasDef && v == "":
		v = def
	case !ok:
		return "", fmt.Sprintf("environment variable %s is not set and has no default: set it, or write ${%s:-value}", name, name)
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", fmt.Sprintf("the value of %s holds a line break, which would change the file's structure", name)
	}
	return v, ""
}

// escapeDollars makes text read back as itself through interpolate: every $
// that would start ${ or $$ is doubled.
func escapeDollars(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		b.WriteByte(text[i])
		if text[i] == '$' && i+1 < len(text) && (text[i+1] == '{' || text[i+1] == '$') {
			b.WriteByte('$')
		}
	}
	return b.String()
}
