package config

import (
	"os"
	"testing"
)

// FuzzParse checks that no input makes Parse panic and that every accepted
// configuration reads back from Marshal unchanged but for its redacted
// secrets.
func FuzzParse(f *testing.F) {
	design, err := os.ReadFile("testdata/design.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(design))
	f.Add("store: {kind: memory}\nwindow: {ttl: 90s}\n")
	f.Add(route(ok, "effects:\n      - entity: 'x/{topic[1]}'\n        add: {n: n}"))
	f.Add("mqtt: {brokers: ['tcp://h:1'], client_id: ${ID:-x}}\nhttp: {listen: ''}\n")
	f.Fuzz(func(t *testing.T, file string) {
		c, err := Parse([]byte(file), "f.yaml", nil)
		if err != nil {
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Parse(out, "out.yaml", nil)
		if err != nil {
			t.Fatalf("reading back %q: %v", out, err)
		}
		want := c.clone()
		want.redact()
		if !equalConfig(want, back) {
			t.Fatalf("round trip changed the config:\n%s", out)
		}
	})
}

// FuzzParseTemplate checks that an accepted template prints as written, and
// so does each of its paths.
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"meter/{topic[1]}", "{a.b}{c}", "x}", "{topic[01]}", "a/{}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := ParseTemplate(s)
		if err != nil {
			return
		}
		if tpl.String() != s {
			t.Fatalf("ParseTemplate(%q).String() = %q", s, tpl.String())
		}
		for _, p := range tpl.Paths() {
			if q, err := ParsePath(p.String()); err != nil || q.String() != p.String() {
				t.Fatalf("path %q does not read back: %v", p, err)
			}
		}
	})
}
