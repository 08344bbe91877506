package config

import (
	"slices"
	"testing"
)

func TestARouteAnEarlierRouteCoversIsWarnedOf(t *testing.T) {
	later := func(earlier, topic string) string {
		return route("name: first", "topic: '"+earlier+"'", "source: [d]", "sequence: seq") +
			"  - " + "name: later\n    topic: '" + topic + "'\n    source: [d]\n    sequence: seq\n"
	}
	warning := func(earlier, topic string) []string {
		return []string{`routes[1] (later).topic: every topic "` + topic + `" matches also matches routes[0] (first)'s "` + earlier + `": ` +
			"a message goes to the first route in the file whose topic matches, so this route never gets one; move it before routes[0] or narrow that topic"}
	}
	for _, tc := range []struct {
		name, earlier, later string
		covered              bool
	}{
		{"a topic under an earlier '+' level is covered", "inc/+/+", "inc/a/b", true},
		{"a '+' under an earlier '#' is covered", "inc/#", "inc/+/x", true},
		{"the parent level of an earlier '#' is covered", "inc/#", "inc", true},
		{"the same filter twice is covered", "plant/+/energy", "plant/+/energy", true},
		{"a '#' after a '+' level is not covered: it matches other depths", "inc/+/+", "inc/#", false},
		{"a '+' after a literal level is not covered", "inc/a/b", "inc/+/b", false},
		{"a longer topic after a shorter filter is not covered", "inc/+", "inc/a/b", false},
		{"a '$' topic after a leading wildcard is not covered", "#", "$SYS/broker/uptime", false},
		{"disjoint filters are not covered", "plant/+/energy", "inc/#", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(later(tc.earlier, tc.later)), "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range c.Warnings() {
				got = append(got, w.String())
			}
			var want []string
			if tc.covered {
				want = warning(tc.earlier, tc.later)
			}
			if !slices.Equal(got, want) {
				t.Errorf("warnings:\n  got  %q\n  want %q", got, want)
			}
		})
	}
}

// A warning about a route names the line of the setting it is about, not
// that of the routes section.
func TestARouteWarningNamesItsSettingsLine(t *testing.T) {
	c, err := Parse([]byte(route("name: first", "topic: 'inc/#'", "source: [d]", "sequence: seq")+
		"  - name: later\n    topic: 'inc/a'\n    source: [d]\n    sequence: seq\n"), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := c.Warnings()
	if len(ws) != 1 || ws[0].Path != "routes[1] (later).topic" || ws[0].Line != 7 {
		t.Fatalf("warnings %+v, want one at routes[1] (later).topic, line 7", ws)
	}
}
