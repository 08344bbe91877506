package config

import "testing"

func TestSparkplugRoutes(t *testing.T) {
	r := "routes[0] (plant)"
	cases := []struct {
		name string
		file string
		want []string
	}{
		{"a sparkplug route with metric effects is accepted",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/plant/+/#\n    effects:\n" +
				"      - entity: \"meter/{topic[3]}/{topic[4]}\"\n        set: {kwh: metrics.Energy, state: \"metrics.Node Control/Rebirth\", at: timestamp}\n        add: {n: seq}", nil},
		{"a sparkplug route that sets its identity is told it is implied",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/#\n    source: [a]\n    sequence: seq",
			[]string{r + ".source: a sparkplug route must not set source: source, sequence and epoch are implied (source [group, edge] from the topic, sequence the payload's seq, epoch the edge's session from bdSeq); drop it",
				r + ".sequence: a sparkplug route must not set sequence: source, sequence and epoch are implied (source [group, edge] from the topic, sequence the payload's seq, epoch the edge's session from bdSeq); drop it"}},
		{"a sparkplug route outside the namespace is refused",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: plant/#",
			[]string{r + `.topic: topic "plant/#": a sparkplug route's topic is under spBv1.0/, like spBv1.0/plant/+/# (spBv1.0/{group}/{type}/{edge}[/{device}])`}},
		{"a sparkplug route reading a json path is refused",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/#\n    effects: [{entity: m, set: {kwh: kwh}}]",
			[]string{r + `.effects[0].set.kwh: "kwh": a sparkplug route reads metrics.<Name> (like metrics.Energy), timestamp, seq or topic[N]`}},
		{"an unknown kind is refused",
			"routes:\n  - name: plant\n    kind: avro\n    topic: a/#\n    source: [a]\n    id: i",
			[]string{r + `.kind: kind "avro" is not json or sparkplug`}},
		{"a sparkplug route on a shared store is accepted",
			"store: {kind: postgres, url: 'postgres://h/db'}\nroutes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/#\n    effects: [{entity: m, add: {kwh: metrics.Energy}}]",
			nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkProblems(t, c.file, c.want...) })
	}
}
