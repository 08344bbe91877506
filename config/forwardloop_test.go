package config

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// forwardLoopWarnings returns the forward loop warnings of file as
// "path: routes named".
func forwardLoopWarnings(t *testing.T, file string) []string {
	t.Helper()
	c, err := Parse([]byte(file), "f.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range c.Warnings() {
		if strings.Contains(w.Message, "comes back as a new message") {
			_, routes, _ := strings.Cut(w.Message, ", and ")
			routes, _, _ = strings.Cut(routes, " can match")
			got = append(got, w.Path+": "+routes)
		}
	}
	return got
}

// TestAForwardWhoseCopiesARouteConsumesIsWarnedOf: a forward publishing
// to a broker replayguard consumes, on topics a route's filter can match,
// has every copy delivered to it again as a new message.
func TestAForwardWhoseCopiesARouteConsumesIsWarnedOf(t *testing.T) {
	file := func(filter, template, more string) string {
		return "routes:\n  - {name: m, topic: '" + filter + "', source: [d], id: msgId, effects: [{forward: {topic: '" + template + "'}}]}\n" + more
	}
	const at = "routes[0] (m).effects[0].forward.topic: "
	for _, tc := range []struct{ name, file, want string }{
		{"the whole topic under every topic", file("#", "clean/{topic}", ""), `routes[0] (m) "#"`},
		{"the whole topic under the route's own prefix", file("plant/#", "plant/clean/{topic}", ""), `routes[0] (m) "plant/#"`},
		{"a topic level in its place", file("plant/+/energy", "plant/{topic[1]}/energy", ""), `routes[0] (m) "plant/+/energy"`},
		{"a topic level beside literal text in one level", file("out/+", "out/x{topic[1]}", ""), `routes[0] (m) "out/+"`},
		{"a payload field, whose text may hold levels", file("plant/+/energy", "plant/{site}", ""), `routes[0] (m) "plant/+/energy"`},
		{"the whole topic under another route's filter",
			file("plant/+/energy", "clean/{topic}", "  - {name: clean, topic: 'clean/+/+/+', source: [d], id: msgId}\n"), `routes[1] (clean) "clean/+/+/+"`},
		{"the output's broker spelled otherwise",
			file("#", "c/{topic}", "mqtt: {brokers: ['tcp://Broker.example:1883']}\noutputs: {mqtt: {brokers: ['mqtt://broker.example:1883']}}\n"), `routes[0] (m) "#"`},
		{"the second feed's broker",
			file("#", "c/{topic}", "mqtt: {feeds: [{name: a, brokers: ['tcp://a:1883']}, {name: b, brokers: ['tcp://b:1883']}]}\noutputs: {mqtt: {brokers: ['tcp://b:1883']}}\n"), `routes[0] (m) "#"`},
		{"the first feed's broker, inherited", file("#", "c/{topic}", "mqtt: {feeds: [{name: a, brokers: ['tcp://a:1883']}, {name: b, brokers: ['tcp://b:1883']}]}\n"), `routes[0] (m) "#"`},

		{"a topic outside every filter", file("plant/+/energy", "clean/{topic}", ""), ""},
		{"a topic level in a topic a level longer", file("plant/+/energy", "plant/{topic[1]}/energy/clean", ""), ""},
		{"a topic level in a topic a level shorter", file("plant/+/energy", "plant/{topic[1]}", ""), ""},
		{"a '$' topic under a leading wildcard", file("#", "$clean/{topic}", ""), ""},
		{"another broker", file("#", "clean/{topic}", "outputs: {mqtt: {brokers: ['tcp://10.0.0.9:1883']}}\n"), ""},
		{"a NATS output beside input mqtt", strings.Replace(file("#", "clean.{d}", ""), "topic: 'clean", "nats: 'clean", 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(forwardLoopWarnings(t, tc.file), "\n")
			if want := at + tc.want; tc.want == "" && got != "" || tc.want != "" && got != want {
				t.Errorf("warnings:\n  got  %q\n  want %q", got, tc.want)
			}
		})
	}
}

// TestAForwardToTheStreamReplayguardConsumesIsWarnedOf: with input
// jetstream, a NATS output on the consumer's server whose subjects the
// consumer takes has every copy delivered again.
func TestAForwardToTheStreamReplayguardConsumesIsWarnedOf(t *testing.T) {
	file := func(filter, subject, more string) string {
		return "input: jetstream\njetstream: {url: 'nats://127.0.0.1:4222', stream: S, consumer: rg" + more + "}\n" +
			"routes:\n  - {name: m, topic: '" + filter + "', source: [d], id: msgId, effects: [{forward: {nats: '" + subject + "'}}]}\n"
	}
	const at = "routes[0] (m).effects[0].forward.nats: "
	for _, tc := range []struct{ name, file, want string }{
		{"a stream of every subject", file("plant/#", "plant.clean.{d}", ""), `routes[0] (m) "plant/#"`},
		{"a subject the consumer's filter takes", file("plant/+/energy", "plant.{topic[1]}.energy", ", subjects: ['plant.*.energy']"), `routes[0] (m) "plant/+/energy"`},
		{"the server spelled otherwise", strings.Replace(file("#", "c.{d}", ""), "127.0.0.1", "LOCALHOST", 1) + "outputs: {nats: {url: 'tls://localhost'}}\n", `routes[0] (m) "#"`},

		{"a subject the consumer's filter does not take", file("#", "cop.{d}", ", subjects: ['plant.>']"), ""},
		{"a subject outside every filter", file("plant/+/energy", "cop.{d}", ""), ""},
		{"another server", file("#", "cop.{d}", "") + "outputs: {nats: {url: 'nats://10.0.0.9:4222'}}\n", ""},
		{"an MQTT output beside input jetstream", strings.Replace(file("#", "clean/{d}", ""), "nats: 'clean", "topic: 'clean", 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(forwardLoopWarnings(t, tc.file), "\n")
			if want := at + tc.want; tc.want == "" && got != "" || tc.want != "" && got != want {
				t.Errorf("warnings:\n  got  %q\n  want %q", got, tc.want)
			}
		})
	}
}

// A forward loop warning names the line of the forward's topic, and what
// to do.
func TestAForwardLoopWarningNamesItsLine(t *testing.T) {
	c, err := Parse([]byte("routes:\n  - name: m\n    topic: 'plant/#'\n    source: [d]\n    id: msgId\n    effects:\n      - forward:\n          topic: 'plant/clean/{topic}'\n"), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := c.Warnings()
	want := `forward topic "plant/clean/{topic}" publishes to tcp://127.0.0.1:1883, a broker replayguard consumes, and routes[0] (m) "plant/#" can match its topics: ` +
		"each copy comes back as a new message and is decided again: a duplicate at best, a conflict held in quarantine when its content differs, " +
		"applied and forwarded again when its key does; " +
		"forward to a topic outside every route's filter, or to another broker (outputs.mqtt.brokers)"
	if len(ws) != 1 || ws[0].Path != "routes[0] (m).effects[0].forward.topic" || ws[0].Line != 8 || ws[0].Message != want {
		t.Fatalf("warnings %+v, want one at routes[0] (m).effects[0].forward.topic, line 8:\n%s", ws, want)
	}
}

// TestAForwardLoopCheckOfALongFileIsQuick: every start runs it, over every
// forward and route, whatever their number and length.
func TestAForwardLoopCheckOfALongFileIsQuick(t *testing.T) {
	long := strings.Repeat("a/", 2000)
	for name, tc := range map[string]struct {
		routes      int
		route, tmpl string
	}{
		"many routes, each forwarding": {3000, "site/+/dev%d/#", "{topic}/clean/{x}"},
		// Each template nearly fits each filter, at every level.
		"long filters and templates": {300, long + long + "a%d", "{x}/" + long + "b/{y}"},
	} {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("routes:\n")
			for i := range tc.routes {
				fmt.Fprintf(&b, "  - {name: r%d, topic: '"+tc.route+"', source: [d], id: msgId, effects: [{forward: {topic: '%s'}}]}\n", i, i, tc.tmpl)
			}
			c, err := Parse([]byte(b.String()), "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			c.forwardLoopWarnings(func(string, string) {})
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the check took %v", d)
			}
		})
	}
}

// TestTheForwardLoopMatchAgreesWithTryingEverySplit: the greedy match
// finds a topic both a template and a filter take exactly when trying
// every number of levels each open level may stand for does.
func TestTheForwardLoopMatchAgreesWithTryingEverySplit(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	var every func(p []tlevel, f []string, open bool) bool // open: the level before p[0] may take f[0] too
	every = func(p []tlevel, f []string, open bool) bool {
		switch {
		case len(f) > 0 && f[0] == "#":
			return true
		case len(f) == 0:
			return len(p) == 0
		}
		return open && every(p, f[1:], true) || len(p) > 0 && p[0].fits(f[0]) && every(p[1:], f[1:], p[0].more)
	}
	for range 20000 {
		var p []tlevel
		for range r.Intn(5) + 1 {
			lit := []string{"a", "b", "$a"}[r.Intn(3)]
			p = append(p, []tlevel{{lit: lit}, {lit: lit}, {lit: lit, any: true}, {lit: lit, any: true, more: true}}[r.Intn(4)])
		}
		var f []string
		for range r.Intn(6) + 1 {
			f = append(f, []string{"a", "b", "+", "$a"}[r.Intn(4)])
		}
		if r.Intn(3) == 0 {
			f = append(f, "#")
		}
		want := every(p, f, false) && !((f[0] == "+" || f[0] == "#") && strings.HasPrefix(p[0].lit, "$"))
		if got := mayMatch(p, f); got != want {
			t.Fatalf("template levels %+v, filter %q: got %v, want %v", p, strings.Join(f, "/"), got, want)
		}
	}
}

// TestAForwardIntoTheConsumedStreamThatNoRouteTakesIsWarnedOf: with input
// jetstream, a NATS output on the consumer's server whose subjects
// jetstream.subjects takes, but no route's filter matches, has every copy
// delivered again and held as malformed. Without jetstream.subjects the
// stream's own subjects decide, which the file does not say: no warning.
func TestAForwardIntoTheConsumedStreamThatNoRouteTakesIsWarnedOf(t *testing.T) {
	file := func(filter, subject, more string) string {
		return "input: jetstream\njetstream: {url: 'nats://127.0.0.1:4222', stream: S, consumer: rg" + more + "}\n" +
			"routes:\n  - {name: m, topic: '" + filter + "', source: [d], id: msgId, effects: [{forward: {nats: '" + subject + "'}}]}\n"
	}
	const at = "routes[0] (m).effects[0].forward.nats"
	for _, tc := range []struct{ name, file, want string }{
		{"a subject the consumer's filter takes and no route", file("plant/+/energy", "cop.{d}", ", subjects: ['plant.>', 'cop.*']"), `jetstream.subjects[1] "cop.*"`},
		{"a subject of many tokens under a wildcard filter", file("meters/+/energy", "plant.clean.{topic}", ", subjects: ['plant.>']"), `jetstream.subjects[0] "plant.>"`},

		{"a subject a route takes (the loop warning's)", file("cop/#", "cop.{d}", ", subjects: ['cop.>']"), ""},
		{"a subject the consumer's filter does not take", file("plant/#", "cop.{d}", ", subjects: ['plant.>']"), ""},
		{"no jetstream.subjects", file("plant/+/energy", "cop.{d}", ""), ""},
		{"another server", file("plant/#", "cop.{d}", ", subjects: ['cop.>']") + "outputs: {nats: {url: 'nats://10.0.0.9:4222'}}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.file), "f.yaml", func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range c.Warnings() {
				if strings.Contains(w.Message, "held in quarantine as malformed") {
					got = append(got, w.Path+": "+w.Message)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("warnings %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], at+": ") || !strings.Contains(got[0], "and "+tc.want+" takes its subjects, but no route's filter matches them")):
				t.Errorf("warnings %q, want one at %s naming %s", got, at, tc.want)
			}
		})
	}
}
