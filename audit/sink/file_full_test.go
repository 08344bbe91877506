package sink_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
)

// A disk that fills up in the middle of a batch leaves the records written
// before the failure on it as whole lines, yet the batch does not count as
// delivered: the sink writes it again from its cursor once there is room.
// Each record must then stand in the file once, or the exported chain reads
// as broken (a record found where the next one should be).
func TestFileOnADiskThatFillsMidBatchHoldsEachRecordOnceAfterTheRetry(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	// Leave about 8 KiB free: the batch below holds about 35 KiB of records.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 56<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "audit.jsonl")
	w := sink.NewFile(sink.FileOptions{Path: path})
	defer w.Close(context.Background())

	recs := make([]engine.AuditRecord, 100)
	for i := range recs {
		recs[i] = engine.AuditRecord{Position: uint64(i + 1), Route: "meters", Outcome: "applied",
			Member: "rg-1", Topic: "plant/m-1/energy", Reason: strings.Repeat("r", 200)}
	}
	err := w.Export(context.Background(), recs)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), path) {
		t.Fatalf("export to a full disk: %v, want an error naming %s and the full disk", err, path)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := w.Export(context.Background(), recs); err != nil {
		t.Fatalf("export again once there is room: %v", err)
	}
	seen := map[uint64]int{}
	for _, r := range readLines(t, path) {
		seen[r.Position]++
	}
	for _, r := range recs {
		if seen[r.Position] != 1 {
			t.Fatalf("record %d stands %d times in the file (%d lines for %d records)", r.Position, seen[r.Position], lineCount(seen), len(recs))
		}
	}
}

func lineCount(m map[uint64]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
