package benchfeed

import (
	"bytes"
	"testing"
)

func TestGenerate(t *testing.T) {
	msgs := Generate(5000, 50, 0.1)
	seen := map[string]bool{}
	replays := 0
	for i, m := range msgs {
		k := m.Key()
		switch {
		case m.Replay && !seen[k]:
			t.Fatalf("message %d: replay of %s before its first delivery", i, k)
		case !m.Replay && seen[k]:
			t.Fatalf("message %d: %s delivered twice without being a replay", i, k)
		case m.Replay:
			replays++
		}
		seen[k] = true
	}
	if got := Unique(msgs); got != 5000 || len(seen) != 5000 {
		t.Errorf("Unique = %d, distinct keys %d, want 5000", got, len(seen))
	}
	if replays < 400 || replays > 600 {
		t.Errorf("%d replays of 5000 with probability 0.1", replays)
	}
	if lines := bytes.Count(Capture(msgs), []byte("\n")); lines != len(msgs) {
		t.Errorf("Capture: %d lines for %d messages", lines, len(msgs))
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	if !bytes.Equal(Capture(Generate(2000, 7, 0.2)), Capture(Generate(2000, 7, 0.2))) {
		t.Error("two generations of the same feed differ")
	}
}
