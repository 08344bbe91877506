package config

import (
	"strings"
	"testing"
)

// Over redundant feeds, an id route is warned of: a path's copies are
// found duplicate only while their keys are in the key window, so a path
// back with a longer backlog would apply the rest again. A sequenced
// route, and an id route on one path, are not.
func TestAnIDRouteOverRedundantFeedsIsWarnedOf(t *testing.T) {
	const feeds = "mqtt:\n  client_id: rg-1\n  feeds:\n    - {name: a, brokers: [tcp://site-a:1883]}\n    - {name: b, brokers: [tcp://site-b:1883]}\n"
	const brokers = "mqtt:\n  client_id: rg-1\n  brokers: [tcp://site-a:1883]\n"
	const id = "name: r\n    topic: a/+/c\n    source: [dev]\n    id: msgId"
	for _, tc := range []struct {
		name, mqtt, route string
		warned            bool
	}{
		{"an id route over two feeds", feeds, id, true},
		{"a sequenced route over two feeds", feeds, ok, false},
		{"an id route on one path", brokers, id, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.mqtt+"window: {max_entries: 2000}\n"+route(tc.route)), "f.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []Problem
			for _, w := range c.Warnings() {
				if w.Path == "routes[0] (r).id" {
					got = append(got, w)
				}
			}
			if tc.warned != (len(got) == 1) || (tc.warned && !strings.Contains(got[0].Message, "window.max_entries 2000")) {
				t.Fatalf("warnings at routes[0] (r).id: %+v, want one naming window.max_entries 2000: %v", got, tc.warned)
			}
		})
	}
}
