package report

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// A key applied again keeps its entities when the place of its first
// application in the ring is reused: a replay of it still counts.
func TestAKeyAppliedAgainIsRememberedPastItsFirstPlace(t *testing.T) {
	p := &replays{limit: 2}
	applied := func(key byte, entity string) {
		p.note(&engine.AuditRecord{Key: engine.Hash{key}, Outcome: engine.Applied.String(),
			Effects: []engine.Change{{Entity: entity}}}, true)
	}
	applied(1, "meter/a")
	applied(1, "meter/a") // applied again: its window entry had expired
	applied(2, "meter/b") // reuses key 1's first place
	p.note(&engine.AuditRecord{Key: engine.Hash{1}, Outcome: engine.Duplicate.String()}, true)
	if p.counts["meter/a"] != 1 {
		t.Fatalf("replays of meter/a %d, want 1: key 1 was forgotten with its older place", p.counts["meter/a"])
	}
	applied(3, "meter/c") // key 1's newer place goes: now it is forgotten
	p.note(&engine.AuditRecord{Key: engine.Hash{1}, Outcome: engine.Duplicate.String()}, true)
	if p.counts["meter/a"] != 1 || len(p.keys) != 2 {
		t.Fatalf("replays of meter/a %d, %d keys kept; want 1 and 2", p.counts["meter/a"], len(p.keys))
	}
}
