package journal_test

import (
	"errors"
	"testing"

	"github.com/replayguard/replayguard/journal"
)

// TestDamageInsideTheLastSegmentIsCorruptNotATornAppend: a changed byte in
// an early record of the last segment is damage, not a torn last append:
// every later record was synced and acknowledged. Open fails with
// ErrCorrupt and cuts nothing off.
func TestDamageInsideTheLastSegmentIsCorruptNotATornAppend(t *testing.T) {
	dir := t.TempDir()
	j := open(t, dir, journal.Options{})
	appendAll(t, j, batch("a", 1, 1, msg("a", 1)))
	seg := segments(t, dir)[0]
	one := size(t, seg)
	appendAll(t, j, batch("a", 2, 2, msg("a", 2)))
	two := size(t, seg)
	for p := uint64(3); p <= 10; p++ {
		appendAll(t, j, batch("a", p, p, msg("a", p)))
	}
	j.Close()
	whole := size(t, seg)
	flip(t, seg, one+(two-one)/2) // inside record 2 of 10
	j2, err := journal.Open(dir, journal.Options{})
	if err == nil {
		j2.Close()
	}
	if !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
	if got := size(t, seg); got != whole {
		t.Fatalf("the segment is %d bytes after Open, was %d: records synced and acknowledged were cut off", got, whole)
	}
}
