package audit_test

import (
	"errors"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
)

// TestScanArchiveReturnsTheErrorOfItsCaller: an error from fn stops the
// scan and is returned as fn gave it, not as a break of the archive's
// chain: a reader that stops early is told apart from a tampered segment.
func TestScanArchiveReturnsTheErrorOfItsCaller(t *testing.T) {
	_, dir := archived(t)
	stop := errors.New("enough")
	n := 0
	_, err := audit.ScanArchive(t.Context(), dir, "", func(engine.AuditRecord) error {
		if n++; n == 10 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || errors.Is(err, audit.ErrBroken) {
		t.Fatalf("ScanArchive with fn failing at its 10th record = %v; want fn's error, not a broken chain", err)
	}
}
