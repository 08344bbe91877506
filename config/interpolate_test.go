package config

import (
	"slices"
	"testing"
)

func TestInterpolate(t *testing.T) {
	env := map[string]string{"HOST": "db", "EMPTY": "", "PORT": "5432", "NL": "a\nb"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name string
		in   string
		want string
		errs []string // "line: message"
	}{
		{"text without references is unchanged", "a: b\n", "a: b\n", nil},
		{"a set variable is substituted", "url: ${HOST}:${PORT}", "url: db:5432", nil},
		{"a default is used when the variable is unset", "k: ${MISSING:-fallback}", "k: fallback", nil},
		{"a default is used when the variable is empty", "k: ${EMPTY:-fallback}", "k: fallback", nil},
		{"a default may be empty", "k: '${MISSING:-}'", "k: ''", nil},
		{"an empty last item of a flow list leaves it out", "k: [${HOST}, ${MISSING:-}]", "k: [db, ]", nil},
		{"a default may hold colons and slashes", "k: ${MISSING:-tcp://h:1}", "k: tcp://h:1", nil},
		{"an empty variable without a default is empty", "k: '${EMPTY}'", "k: ''", nil},
		{"$$ is a literal dollar", "k: $${HOST} $$$$", "k: ${HOST} $$", nil},
		{"a lone dollar is kept", "topic: $SYS/# costs $5", "topic: $SYS/# costs $5", nil},
		{"a dollar at the end is kept", "k: a$", "k: a$", nil},
		{"full-line comments are not interpolated", "# uses ${MISSING}\n  # ${MISSING}\nk: v", "# uses ${MISSING}\n  # ${MISSING}\nk: v", nil},
		{"an unset variable without a default is an error naming it and its line", "a: 1\nb: ${MISSING}\nc: ${ALSO}", "",
			[]string{"2: ${MISSING}: environment variable MISSING is not set and has no default: set it, or write ${MISSING:-value}",
				"3: ${ALSO}: environment variable ALSO is not set and has no default: set it, or write ${ALSO:-value}"}},
		{"an unterminated reference is an error", "k: ${HOST", "",
			[]string{"1: unterminated ${: close it with } (write $$ for a literal $)"}},
		{"a bad variable name is an error", "k: ${1X}", "",
			[]string{`1: ${1X}: "1X" is not a variable name: write ${NAME} or ${NAME:-default} (and $$ for a literal $)`}},
		{"an empty reference is an error", "k: ${}", "",
			[]string{`1: ${}: "" is not a variable name: write ${NAME} or ${NAME:-default} (and $$ for a literal $)`}},
		{"a value with a line break is an error unquoted", "k: ${NL}", "",
			[]string{`1: ${NL}: the value of NL holds a line break (a secret file written with echo ends in one), which an unquoted value does not take: remove it, or write the reference in double quotes ("${NL}") to keep it`}},
		{"a value with a line break is escaped in double quotes", `k: "<${NL}>"`, `k: "<a\nb>"`, nil},
		{"a value with a line break is an error in single quotes", "k: '${NL}'", "",
			[]string{`1: ${NL}: the value of NL holds a line break or a control character, which a single-quoted value cannot hold: write the reference in double quotes ("${NL}")`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, probs := interpolate(tt.in, getenv)
			var errs []string
			for _, p := range probs {
				errs = append(errs, itoa(p.Line)+": "+p.Message)
			}
			if !slices.Equal(errs, tt.errs) {
				t.Fatalf("problems:\n  got  %q\n  want %q", errs, tt.errs)
			}
			if tt.errs == nil && got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestInterpolationErrorsStopParsing(t *testing.T) {
	_, err := Parse([]byte("store:\n  url: ${DB_URL}\n  bogus: 1\n"), "replayguard.yaml", nil)
	want := "replayguard.yaml:2: ${DB_URL}: environment variable DB_URL is not set and has no default: set it, or write ${DB_URL:-value}"
	if err == nil || err.Error() != want {
		t.Fatalf("Parse: %v\nwant %s", err, want)
	}
}

func TestEscapeDollars(t *testing.T) {
	for _, s := range []string{"", "$", "a$b", "$$", "${X}", "$${X}", "x$$$y", "$SYS/#", "end$"} {
		t.Run("escaping "+s+" reads back as itself", func(t *testing.T) {
			got, probs := interpolate(escapeDollars(s), func(string) (string, bool) { return "", false })
			if len(probs) > 0 || got != s {
				t.Fatalf("escape %q -> %q -> %q %v", s, escapeDollars(s), got, probs)
			}
		})
	}
}
