package journal_test

import (
	"errors"
	"testing"

	"github.com/replayguard/replayguard/journal"
)

// TestDamageToALengthInsideTheLastSegmentIsCorrupt: a changed byte in the
// length of an early record of the last segment hides where the next
// record begins, but the records after it were synced and acknowledged
// all the same: Open fails with ErrCorrupt and cuts nothing off.
func TestDamageToALengthInsideTheLastSegmentIsCorrupt(t *testing.T) {
	for _, at := range []struct {
		name string
		off  int64 // from the start of record 2
	}{{"its high byte", 3}, {"its low byte", 0}} {
		t.Run(at.name, func(t *testing.T) {
			dir := t.TempDir()
			j := open(t, dir, journal.Options{})
			appendAll(t, j, batch("a", 1, 1, msg("a", 1)))
			seg := segments(t, dir)[0]
			one := size(t, seg)
			for p := uint64(2); p <= 10; p++ {
				appendAll(t, j, batch("a", p, p, msg("a", p)))
			}
			j.Close()
			whole := size(t, seg)
			flip(t, seg, one+at.off) // the length of record 2 of 10
			j2, err := journal.Open(dir, journal.Options{})
			if err == nil {
				j2.Close()
			}
			if !errors.Is(err, journal.ErrCorrupt) {
				t.Errorf("Open = %v, want ErrCorrupt", err)
			}
			if got := size(t, seg); got != whole {
				t.Fatalf("the segment is %d bytes after Open, was %d: records synced and acknowledged were cut off", got, whole)
			}
		})
	}
}
