package config

import (
	"strings"
	"testing"
)

// TestASettingTheStoreOrInputDoesNotReadIsWarnedOf: a store url beside
// the embedded store, a path beside the memory store, or a share group
// beside input jetstream is taken for in force by a reader of the file,
// and is read by nothing.
func TestASettingTheStoreOrInputDoesNotReadIsWarnedOf(t *testing.T) {
	const rt = "routes:\n  - {name: m, topic: \"a/+\", source: [\"topic[1]\"], id: msgId}\n"
	for _, tc := range []struct{ name, file, want string }{
		{"a url beside the embedded store", rt + "store: {kind: embedded, url: \"postgres://db/ops\"}\n", "store.url"},
		{"a path beside the memory store", rt + "store: {kind: memory, path: /var/lib/rg}\n", "store.path"},
		{"a share group beside input jetstream", rt + "input: jetstream\njetstream: {stream: S, consumer: rg}\nmqtt: {share_group: ops}\n", "mqtt.share_group"},
		{"a share group beside mqtt", rt + "store: {kind: postgres, url: \"postgres://db/ops\"}\nmqtt: {share_group: ops, client_id: rg-1}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.file), "f.yaml", func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range c.Warnings() {
				if strings.HasPrefix(w.Path, "store.") || strings.HasPrefix(w.Path, "mqtt.share") {
					got = append(got, w.Path)
				}
			}
			if strings.Join(got, ",") != tc.want {
				t.Fatalf("warnings at %v, want %q", got, tc.want)
			}
		})
	}
}
