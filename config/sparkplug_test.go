package config

import (
	"strings"
	"testing"
)

// sparkplugPaths is what lint says a sparkplug route reads.
const sparkplugPaths = `a sparkplug route reads metrics.<Name> (like metrics.Energy), timestamp.<Name> and is_historical.<Name> ` +
	`(that metric's own timestamp and flag), timestamp, seq or topic[N]`

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
		{"a sparkplug route reading a metric's own timestamp and flag is accepted",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/plant/+/#\n    effects:\n" +
				"      - entity: \"meter/{topic[3]}\"\n        set: {at: timestamp.Energy, stored: \"is_historical.Node Control/Rebirth\"}", nil},
		{"a sparkplug route that sets its identity is told it is implied",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/#\n    source: [a]\n    sequence: seq",
			[]string{r + ".source: a sparkplug route must not set source: source, sequence and epoch are implied (source [group, edge] from the topic, sequence the payload's seq, epoch the edge's session from bdSeq); drop it",
				r + ".sequence: a sparkplug route must not set sequence: source, sequence and epoch are implied (source [group, edge] from the topic, sequence the payload's seq, epoch the edge's session from bdSeq); drop it"}},
		{"a sparkplug route outside the namespace is refused",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: plant/#",
			[]string{r + `.topic: topic "plant/#": a sparkplug route's topic is under spBv1.0/, like spBv1.0/plant/+/# (spBv1.0/{group}/{type}/{edge}[/{device}])`}},
		{"a sparkplug route reading a json path is refused",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/#\n    effects: [{entity: m, set: {kwh: kwh}}]",
			[]string{r + `.effects[0].set.kwh: "kwh": a sparkplug route reads metrics.<Name> (like metrics.Energy), timestamp.<Name> and is_historical.<Name> (that metric's own timestamp and flag), timestamp, seq or topic[N]`}},
		{"a sparkplug route whose topic names a command type is refused",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/plant/NCMD/#",
			[]string{r + `.topic: topic "spBv1.0/plant/NCMD/#": message type "NCMD" is not one a sparkplug route decides (NBIRTH, NDATA, NDEATH, DBIRTH, DDATA, DDEATH; ` +
				`NCMD and DCMD are a host application's commands, not an edge's messages); write + for the type level, like spBv1.0/plant/+/#, and the route subscribes to the types it decides alone`}},
		{"a sparkplug route on the host applications' STATE topics is refused",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/STATE/#",
			[]string{r + `.topic: topic "spBv1.0/STATE/#": spBv1.0/STATE/ holds the host applications' STATE messages, not an edge's: ` +
				`a sparkplug route decides NBIRTH, NDATA, NDEATH, DBIRTH, DDATA, DDEATH; name a group, like spBv1.0/plant/#`}},
		{"a sparkplug route that names a data type is accepted",
			"routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/plant/DDATA/+/+\n    effects: [{entity: m, add: {kwh: metrics.Energy}}]",
			nil},
		{"an unknown kind is refused",
			"routes:\n  - name: plant\n    kind: avro\n    topic: a/#\n    source: [a]\n    id: i",
			[]string{r + `.kind: kind "avro" is not json or sparkplug`}},
		{"a sparkplug route whose sql argument, entity or forward names a json path is refused, as the engine refuses it at start",
			"store: {kind: postgres, url: 'postgres://h/db'}\nroutes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/plant/#\n    effects:\n" +
				"      - {sql: 'INSERT INTO r (m, kwh) VALUES ($$1, $$2)', args: ['topic[3]', kwh]}\n" +
				"      - {entity: 'meter/{meter}', set: {kwh: metrics.Energy}}\n      - forward: {topic: 'clean/{meter}'}",
			[]string{r + `.effects[0].args[1]: "kwh": ` + sparkplugPaths, r + `.effects[1].entity: "meter": ` + sparkplugPaths,
				r + `.effects[2].forward.topic: "meter": ` + sparkplugPaths}},
		{"a sparkplug route whose sql argument, entity and forward name what it reads is accepted",
			"store: {kind: postgres, url: 'postgres://h/db'}\nroutes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/plant/#\n    effects:\n" +
				"      - {sql: 'INSERT INTO r (m, at, kwh, s) VALUES ($$1, $$2, $$3, $$4)', args: ['topic[3]', timestamp.Energy, metrics.Energy, is_historical.Energy]}\n" +
				"      - {entity: 'meter/{topic[3]}/{metrics.Serial}', set: {kwh: metrics.Energy}}\n      - forward: {topic: 'clean/{topic[3]}/{metrics.Line}'}",
			nil},
		{"a sparkplug route on a shared store is accepted",
			"store: {kind: postgres, url: 'postgres://h/db'}\nroutes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/#\n    effects: [{entity: m, add: {kwh: metrics.Energy}}]",
			nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkProblems(t, c.file, c.want...) })
	}
}

// On input jetstream the stream's subjects decide what comes: a sparkplug
// route whose topic covers the host applications' commands is warned of,
// unless jetstream.subjects names only the types it decides.
func TestASparkplugRouteOnAStreamWithCommandsIsWarnedOf(t *testing.T) {
	const route = "routes:\n  - name: plant\n    kind: sparkplug\n    topic: spBv1.0/plant/#\n    effects: [{entity: m, add: {kwh: metrics.Energy}}]\n"
	const want = `routes[0] (plant).topic: on input jetstream the stream's subjects, not the route's topic, decide what comes: ` +
		`topic "spBv1.0/plant/#" covers a host application's commands (NCMD, DCMD) and STATE messages, which are not an edge's, ` +
		`and each one in the stream is held as malformed; list in jetstream.subjects only the types a sparkplug route decides ` +
		`(NBIRTH, NDATA, NDEATH, DBIRTH, DDATA, DDEATH), like spBv1//0.plant.NDATA.>`
	for _, tc := range []struct {
		name, file string
		warned     bool
	}{
		{"a stream read whole", "input: jetstream\njetstream: {url: 'nats://127.0.0.1:4222', stream: S, consumer: rg}\n" + route, true},
		{"subjects that take commands", "input: jetstream\njetstream: {url: 'nats://127.0.0.1:4222', stream: S, consumer: rg, subjects: ['spBv1//0.plant.>']}\n" + route, true},
		{"subjects of the decided types alone", "input: jetstream\njetstream: {url: 'nats://127.0.0.1:4222', stream: S, consumer: rg, " +
			"subjects: ['spBv1//0.plant.NBIRTH.>', 'spBv1//0.plant.NDATA.>', 'spBv1//0.plant.NDEATH.>']}\n" + route, false},
		{"mqtt, where the route subscribes to its types alone", route, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.file), "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range c.Warnings() {
				if s := w.String(); strings.HasPrefix(s, "routes[0] (plant).topic") {
					got = append(got, s)
				}
			}
			if tc.warned && (len(got) != 1 || got[0] != want) || !tc.warned && len(got) != 0 {
				t.Fatalf("warnings %q, want %v", got, tc.warned)
			}
		})
	}
}
