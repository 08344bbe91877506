package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestAnOutboxBoundBelowOneBatchIsRefusedForRun: with outbox.max_entries
// under one batch's forward entries every batch passes the bound, and
// readiness turns to "outbox full" and back with each; run refuses it,
// naming both settings and the least bound that works.
func TestAnOutboxBoundBelowOneBatchIsRefusedForRun(t *testing.T) {
	two := "store: {kind: memory}\n" + route(ok, `effects: [{forward: {topic: "out/{topic}"}}, {forward: {webhook: "http://h/hook"}}]`)
	one := "store: {kind: memory}\n" + route(ok, `effects: [{forward: {topic: "out/{topic}"}}]`)
	client := "mqtt: {client_id: rg-1}\n"
	for _, tc := range []struct {
		name, file, want string
	}{
		{"the default batch with a bound of 1000", one + client + "outbox:\n  max_entries: 1000\n",
			`f.yaml:10: outbox.max_entries: max_entries 1000 is below what one batch can add, mqtt.batch_size 1024 = 1024 entries: every batch would pass the bound, and readiness turn to "outbox full" and back with each; raise outbox.max_entries to at least 1024 or lower mqtt.batch_size`},
		{"two forwards a message", two + "mqtt: {client_id: rg-1, batch_size: 100}\noutbox: {max_entries: 150}\n",
			`f.yaml:9: outbox.max_entries: max_entries 150 is below what one batch can add, mqtt.batch_size 100 × 2 forward effects of route r = 200 entries: every batch would pass the bound, and readiness turn to "outbox full" and back with each; raise outbox.max_entries to at least 200 or lower mqtt.batch_size`},
		{"a JetStream input's batch", one + "input: jetstream\njetstream: {url: nats://127.0.0.1:4222, stream: s, consumer: rg, batch_size: 500}\noutbox: {max_entries: 400}\n",
			`f.yaml:10: outbox.max_entries: max_entries 400 is below what one batch can add, jetstream.batch_size 500 = 500 entries: every batch would pass the bound, and readiness turn to "outbox full" and back with each; raise outbox.max_entries to at least 500 or lower jetstream.batch_size`},
		{"a bound of one batch", one + client + "outbox: {max_entries: 1024}\n", ""},
		{"a small bound without forwards", "store: {kind: memory}\n" + route(ok) + client + "outbox: {max_entries: 10}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRun([]byte(tc.file), "f.yaml", func(string) (string, bool) { return "", false })
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("ParseRun:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
	t.Run("ingest's batch is checked the same way, naming --batch", func(t *testing.T) {
		c, err := Parse([]byte(one+"outbox: {max_entries: 10}\n"), "f.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		why := c.OutboxBoundProblem(1000, "--batch")
		if !strings.Contains(why, fmt.Sprintf("--batch %d = %d entries", 1000, 1000)) || !strings.Contains(why, "lower --batch") {
			t.Fatalf("problem %q", why)
		}
	})
}
