package sparkplug_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// A Sparkplug message found malformed before or while its payload is read
// (too large to read, not a Sparkplug B payload) is recorded under its
// edge, which its topic names, as a JSON route's is under the source its
// topic levels name; one whose topic names no edge says why it has none.
func TestAMalformedSparkplugMessageIsRecordedUnderTheEdgeItsTopicNames(t *testing.T) {
	h := newHarnessWith(t, nil, func(o *engine.Options) { o.MaxPayload = 1024 })
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	data := edge.Data(c.next(), pulse())
	for _, tc := range []struct {
		name, topic string
		payload     []byte
		reason      string
	}{
		{"too large", data.Topic, make([]byte, 2000), "over max_payload 1024"},
		{"not a Sparkplug B payload", data.Topic, []byte("\xff\xff\xff garbage"), "not a Sparkplug B payload"},
	} {
		d := h.expect(engine.Malformed, sparkplug.Message{Topic: tc.topic, Payload: tc.payload})[0]
		if !strings.Contains(d.Reason, tc.reason) || !slices.Equal(d.Source, []string{"plant", "m1"}) {
			t.Errorf("%s: %s (%q) under source %q, want under [plant m1]", tc.name, d.Outcome, d.Reason, d.Source)
		}
	}
	d := h.expect(engine.Malformed, sparkplug.Message{Topic: "spBv1.0/plant/NDATA", Payload: make([]byte, 2000)})[0]
	if d.Source != nil || !strings.Contains(d.Reason, "source not read: topic") {
		t.Errorf("an oversized message on a topic that names no edge: %q under source %q", d.Reason, d.Source)
	}
}
