package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

func TestAMalformedMessageIsAuditedWithTheSourceItsTopicAndReadFieldsGive(t *testing.T) {
	cases := []struct {
		name, topic, payload string
		source               []string // nil: the source cannot be read
		reason               string   // what the reason says (it ends with, when the source is unknown)
		maxPayload           int      // engine.Options.MaxPayload; 0: the default
	}{
		{"a topic source is read from a payload that is not JSON", "plant/m3/energy", `not json`, []string{"m3"}, "payload is not valid JSON", 0},
		{"a topic source is read when the id is missing", "plant/m3/energy", `{"kwh":1}`, []string{"m3"}, "id field msgId is missing", 0},
		{"a topic source is read from a payload that is not an object", "plant/m3/energy", `[1]`, []string{"m3"}, "not an object: the route reads fields of it", 0},
		{"payload source fields read before a bad sequence give the source", "incidents/fd", `{"agency":"fd","source_id":"e1","boot_id":1,"sequence":"x"}`, []string{"fd", "e1"}, "want a JSON integer, got string", 0},
		{"payload source fields read before the payload breaks give the source", "incidents/fd", `{"agency":"fd","source_id":"e1","sequence":`, []string{"fd", "e1"}, "payload is not valid JSON", 0},
		{"a source field past where the payload breaks is not read, and the reason says so", "incidents/fd", `{"agency":"fd","sequence":1,`, nil, "payload is not valid JSON; source not read: field source_id was not read", 0},
		{"a number cut short by the payload's end is not read", "incidents/fd", `{"source_id":"e1","agency":12`, nil, "source not read: field agency was not read", 0},
		{"a source field written twice is not read", "incidents/fd", `{"agency":"fd","agency":"pd","source_id":"e1","sequence":1}`, nil, "field agency appears more than once; source not read: field agency was not read", 0},
		{"a source field met after a bad value is not read", "incidents/fd", `{"casualty_delta":1e99999,"agency":"fd","source_id":"e1","sequence":1}`, nil, "source not read: field agency was not read", 0},
		{"a missing source field is named once", "incidents/fd", `{"agency":"fd","sequence":1}`, nil, "source field source_id is missing", 0},
		{"a topic source is read from a payload over max_payload", "plant/m3/energy", `{"msgId":"a","pad":"` + strings.Repeat("x", 64) + `"}`,
			[]string{"m3"}, "payload is 86 bytes, over max_payload 64", 64},
		{"the source fields of a payload over max_payload are not read, and the reason says so", "incidents/fd",
			`{"agency":"fd","source_id":"e1","boot_id":1,"sequence":1,"pad":"` + strings.Repeat("x", 64) + `"}`,
			nil, "over max_payload 64; source not read: field agency was not read", 64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, engine.Options{MaxPayload: c.maxPayload})
			d := h.feed(engine.Message{Topic: c.topic, Payload: []byte(c.payload)})[0]
			if d.Outcome != engine.Malformed || !strings.HasSuffix(d.Reason, c.reason) {
				t.Fatalf("got %s %q, want malformed ending %q", d.Outcome, d.Reason, c.reason)
			}
			if c.source == nil && strings.Count(d.Reason, "source_id") > 1 {
				t.Fatalf("reason %q names the source field twice", d.Reason)
			}
			var rec engine.AuditRecord
			err := h.store.ScanAudit(context.Background(), d.Position, func(r engine.AuditRecord) error { rec = r; return context.Canceled })
			if err != nil && err != context.Canceled {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Source, c.source) || rec.Reason != d.Reason {
				t.Fatalf("audit record #%d: source %q reason %q, want source %q reason %q", d.Position, rec.Source, rec.Reason, c.source, d.Reason)
			}
			if h2, err := engine.ChainHash(rec); err != nil || h2 != rec.Hash {
				t.Fatalf("record's hash %s, recomputed %s (%v)", rec.Hash, h2, err)
			}
		})
	}
}
