package config

import "testing"

func TestATopicLevelIsNeverANumber(t *testing.T) {
	r := "routes[0] (r)"
	for _, tc := range []struct {
		name string
		file string
		want []string
	}{
		{"a topic level as sequence is valid: its digits are read as an integer",
			route("name: r", "topic: inc/+/+", "source: [agency]", "sequence: 'topic[1]'"), nil},
		{"a topic level as epoch is valid: an epoch may be a string",
			route("name: r", "topic: inc/+/+", "source: [agency]", "sequence: seq", "epoch: 'topic[2]'"), nil},
		{"a topic level as source, id and entity placeholder is valid",
			route("name: r", "topic: m/+/e", "source: ['topic[1]']", "id: 'topic[2]'") + effects("{entity: 'm/{topic[1]}', set: {site: 'topic[1]'}}"), nil},
		{"add, max and min of a topic level are refused",
			route("name: r", "topic: m/+/e", "source: [dev]", "id: msgId") +
				effects("{entity: m, add: {n: 'topic[1]'}, max: {hi: 'topic[0]'}}", "{entity: m, min: {lo: 'topic[2]'}}"),
			[]string{
				r + `.effects[0].add.n: "topic[1]" is a topic level, which is text, and add takes a JSON number: every message with that level would be malformed; name a payload field holding the number, or use set to keep the level as text`,
				r + `.effects[0].max.hi: "topic[0]" is a topic level, which is text, and max takes a JSON number: every message with that level would be malformed; name a payload field holding the number, or use set to keep the level as text`,
				r + `.effects[1].min.lo: "topic[2]" is a topic level, which is text, and min takes a JSON number: every message with that level would be malformed; name a payload field holding the number, or use set to keep the level as text`}},
		{"a sparkplug route adding a topic level is refused",
			"routes:\n  - name: r\n    kind: sparkplug\n    topic: spBv1.0/#\n    effects: [{entity: m, add: {n: 'topic[3]'}}]",
			[]string{r + `.effects[0].add.n: "topic[3]" is a topic level, which is text, and add takes a JSON number: every message with that level would be malformed; name a payload field holding the number, or use set to keep the level as text`}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkProblems(t, tc.file, tc.want...) })
	}
}
