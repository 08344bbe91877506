package deploy_test

import (
	"slices"
	"strings"
	"testing"
)

// A process that starts ages its stored keys by the wall clock, so the
// unit starts run only once the clock is synchronised
// (docs/how-it-decides.md, the wall clock).
func TestTheServiceStartsAfterTheClockIsSynced(t *testing.T) {
	for line := range strings.Lines(read(t, "replayguard.service")) {
		if after, ok := strings.CutPrefix(strings.TrimSpace(line), "After="); ok {
			if slices.Contains(strings.Fields(after), "time-sync.target") {
				return
			}
		}
	}
	t.Fatal("replayguard.service: no After=time-sync.target: run may start, and age its stored keys, before the clock is synchronised")
}
