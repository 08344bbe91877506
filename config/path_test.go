package config

import (
	"errors"
	"reflect"
	"testing"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Path
		err  string
	}{
		{"a single name is a payload path", "msgId", Path{Segments: []string{"msgId"}}, ""},
		{"dots separate nested names", "a.b.c", Path{Segments: []string{"a", "b", "c"}}, ""},
		{"a bare 'topic' is a payload field", "topic", Path{Segments: []string{"topic"}}, ""},
		{"topic[N] is a topic level", "topic[0]", Path{Topic: true, Level: 0}, ""},
		{"topic levels may be large", "topic[12]", Path{Topic: true, Level: 12}, ""},
		{"an empty path is refused", "", Path{}, "invalid path: empty"},
		{"a leading dot is refused", ".a", Path{}, `invalid path: ".a" has an empty segment: write dotted names like a.b.c`},
		{"a trailing dot is refused", "a.", Path{}, `invalid path: "a." has an empty segment: write dotted names like a.b.c`},
		{"array indexes are refused", "a[0]", Path{}, `invalid path: "a[0]": only topic[N] uses brackets; payload paths are dotted names like a.b.c`},
		{"braces are refused", "a{b}", Path{}, `invalid path: "a{b}": only topic[N] uses brackets; payload paths are dotted names like a.b.c`},
		{"a negative level is refused", "topic[-1]", Path{}, `invalid path: "topic[-1]": the level in topic[N] is a whole number from 0, like topic[1]`},
		{"a leading zero is refused", "topic[01]", Path{}, `invalid path: "topic[01]": the level in topic[N] is a whole number from 0, like topic[1]`},
		{"an empty level is refused", "topic[]", Path{}, `invalid path: "topic[]": the level in topic[N] is a whole number from 0, like topic[1]`},
		{"a name as level is refused", "topic[x]", Path{}, `invalid path: "topic[x]": the level in topic[N] is a whole number from 0, like topic[1]`},
		{"text after the bracket is refused", "topic[1].a", Path{}, `invalid path: "topic[1].a": write topic[N] with nothing after the bracket`},
		{"an unclosed bracket is refused", "topic[1", Path{}, `invalid path: "topic[1": write topic[N] with nothing after the bracket`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePath(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || !errors.Is(err, ErrPath) {
					t.Fatalf("ParsePath(%q) error %v, want %s", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) || got.String() != tt.in {
				t.Fatalf("ParsePath(%q) = %+v (%s), %v", tt.in, got, got, err)
			}
		})
	}
}

func TestParseTemplate(t *testing.T) {
	p := func(s string) *Path { x, _ := ParsePath(s); return &x }
	tests := []struct {
		name string
		in   string
		want []TemplatePart
		err  string
	}{
		{"a literal is one part", "plant/total", []TemplatePart{{Literal: "plant/total"}}, ""},
		{"placeholders alternate with literals", "meter/{topic[1]}/{a.b}",
			[]TemplatePart{{Literal: "meter/"}, {Path: p("topic[1]")}, {Literal: "/"}, {Path: p("a.b")}}, ""},
		{"adjacent placeholders are allowed", "{a}{b}", []TemplatePart{{Path: p("a")}, {Path: p("b")}}, ""},
		{"an empty template is refused", "", nil, "invalid entity template: empty"},
		{"an unclosed brace is refused", "a/{b", nil, `invalid entity template: "a/{b": '{' without a matching '}'`},
		{"a nested brace is refused", "{a{b}}", nil, `invalid entity template: "{a{b}}": '{' without a matching '}'`},
		{"a stray closing brace is refused", "a}", nil, `invalid entity template: "a}": '}' without '{'`},
		{"an empty placeholder is refused", "a/{}", nil, `invalid entity template: "a/{}": empty placeholder {}`},
		{"a placeholder with a bad path is refused", "{topic[x]}", nil,
			`invalid entity template: "{topic[x]}": placeholder {topic[x]}: invalid path: "topic[x]": the level in topic[N] is a whole number from 0, like topic[1]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTemplate(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || !errors.Is(err, ErrTemplate) {
					t.Fatalf("ParseTemplate(%q) error %v, want %s", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got.Parts, tt.want) || got.String() != tt.in {
				t.Fatalf("ParseTemplate(%q) = %+v (%s), %v", tt.in, got.Parts, got, err)
			}
		})
	}
}

func TestValidateTopicFilter(t *testing.T) {
	tests := []struct {
		name   string
		filter string
		err    string
	}{
		{"a plain topic is valid", "a/b/c", ""},
		{"'+' alone in a level is valid", "+/b/+", ""},
		{"'#' alone is valid", "#", ""},
		{"'#' last is valid", "a/+/#", ""},
		{"empty levels are valid", "a//b/", ""},
		{"a $SYS filter is valid", "$SYS/#", ""},
		{"an empty filter is refused", "", "invalid topic filter: empty"},
		{"'#' before the last level is refused", "#/a", `invalid topic filter: "#/a": '#' must be alone in the last level, like a/b/#`},
		{"'#' sharing a level is refused", "a/b#", `invalid topic filter: "a/b#": '#' must be alone in the last level, like a/b/#`},
		{"'+' sharing a level is refused", "a+/b", `invalid topic filter: "a+/b": '+' must be alone in its level, like a/+/c`},
		{"NUL is refused", "a\x00b", `invalid topic filter: "a\x00b" contains a NUL character`},
		{"invalid UTF-8 is refused", "a\xffb", `invalid topic filter: "a\xffb" is not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateTopicFilter(tt.filter)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || err.Error() != tt.err || !errors.Is(err, ErrTopicFilter)) {
				t.Fatalf("ValidateTopicFilter(%q) = %v, want %q", tt.filter, err, tt.err)
			}
		})
	}
}
