package engine_test

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// TestDistinctLoneSurrogateIDsAreNotOneKey: two producer ids that differ
// only in a lone UTF-16 surrogate escape are two messages; nothing proves
// the second a duplicate of the first. (A string with an invalid UTF-8
// byte is malformed; an escape that stands for no character is too.)
func TestDistinctLoneSurrogateIDsAreNotOneKey(t *testing.T) {
	h := newHarness(t, engine.Options{})
	a := engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-\ud800","kwh":1}`)}
	b := engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-\udc00","kwh":1}`)}
	c := engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-\ufffd","kwh":1}`)}
	pair := engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"r-\ud83d\ude00","kwh":1}`)}
	if got := h.outcomes(a, b, c, pair); got != "malformed malformed applied applied" {
		t.Fatalf("ids r-\\ud800, r-\\udc00, r-\\ufffd, r-\\ud83d\\ude00 decided %q, want malformed malformed applied applied", got)
	}
}
