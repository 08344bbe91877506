package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestHTTPTokens(t *testing.T) {
	tokens := func(items ...string) string { return "http:\n  tokens:\n" + strings.Join(items, "") }
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"a viewer and an operator are accepted", tokens(
			"    - {name: watch desk, token_env: RG_VIEWER, role: viewer}\n",
			"    - {name: j.doe, token_file: /run/secrets/jdoe, role: operator}\n"), nil},
		{"auth_reads with a token list is accepted", tokens(
			"    - {name: a, token_env: A, role: viewer}\n") + "  auth_reads: true\n", nil},
		{"a token without a name is refused", tokens("    - {token_env: A, role: viewer}\n"),
			[]string{"http.tokens[0].name: name is empty: every token needs a unique name, which the audit records of its releases and discards carry"}},
		{"a name with spaces around it is refused", tokens("    - {name: ' a', token_env: A, role: viewer}\n"),
			[]string{`http.tokens[0] ( a).name: name " a" has leading or trailing spaces, control characters or invalid UTF-8`}},
		{"a name used twice is refused", tokens(
			"    - {name: a, token_env: A, role: viewer}\n",
			"    - {name: a, token_env: B, role: operator}\n"),
			[]string{`http.tokens[1] (a).name: name "a" is already used by tokens[0]`}},
		{"a token with no source is refused", tokens("    - {name: a, role: viewer}\n"),
			[]string{"http.tokens[0] (a): neither token_env nor token_file is set: name where the token is"}},
		{"a token with two sources is refused", tokens("    - {name: a, token_env: A, token_file: /a, role: viewer}\n"),
			[]string{"http.tokens[0] (a): token_env and token_file are both set: keep one"}},
		{"a token without a role is refused", tokens("    - {name: a, token_env: A}\n"),
			[]string{"http.tokens[0] (a).role: role is required: viewer (reads) or operator (reads, release and discard)"}},
		{"an unknown role is refused", tokens("    - {name: a, token_env: A, role: admin}\n"),
			[]string{`http.tokens[0] (a).role: role "admin" is not viewer or operator`}},
		{"the list and the single token together are refused", "http:\n  token_env: T\n" + tokens("    - {name: a, token_env: A, role: viewer}\n")[len("http:\n"):],
			[]string{`http.tokens: tokens and the single token_env/token_file are both set: keep one (the single token is an operator named "operator")`}},
		{"an unknown key in an entry is refused", tokens("    - {name: a, token_env: A, role: viewer, token: s3cret}\n"),
			[]string{`http.tokens[0] (a): unknown key "token"; known keys: name, role, token_env, token_file`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkProblems(t, tt.file, tt.want...) })
	}
}

func TestHTTPTokenProblemsNameTheirLine(t *testing.T) {
	file := "http:\n  tokens:\n    - name: a\n      token_env: A\n      role: viewer\n    - name: a\n      token_env: B\n      token_file: /b\n      role: root\n"
	_, err := Parse([]byte(file), "f.yaml", nil)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, fmt.Sprintf("%d: %s", p.Line, p))
	}
	want := []string{
		`6: http.tokens[1] (a).name: name "a" is already used by tokens[0]`,
		`6: http.tokens[1] (a): token_env and token_file are both set: keep one`,
		`9: http.tokens[1] (a).role: role "root" is not viewer or operator`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(err.Error(), "f.yaml:9: http.tokens[1] (a).role") {
		t.Fatalf("the error does not say file:line: %v", err)
	}
}

func TestTokenList(t *testing.T) {
	t.Run("the single token is one operator named operator", func(t *testing.T) {
		got := HTTPConfig{TokenFile: "/t"}.TokenList()
		if len(got) != 1 || got[0] != (TokenConfig{Name: "operator", TokenFile: "/t", Role: RoleOperator}) {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("config print shows where tokens are, never a secret", func(t *testing.T) {
		c, err := Parse([]byte("http:\n  tokens:\n    - {name: j.doe, token_env: RG_JDOE, role: operator}\n"), "f.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "tokens:\n    - name: j.doe\n      token_env: RG_JDOE\n      role: operator\n") {
			t.Fatalf("config print:\n%s", out)
		}
		back, err := Parse(out, "printed.yaml", nil)
		if err != nil || len(back.HTTP.Tokens) != 1 || back.HTTP.Tokens[0] != c.HTTP.Tokens[0] {
			t.Fatalf("printed config reads back as %+v, %v", back.HTTP.Tokens, err)
		}
	})
}
