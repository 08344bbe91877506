package embedded

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// Records of very different sizes, some larger than a chunk, read back from
// every position.
func TestAuditChunksScanFromEveryPosition(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var head engine.Hash
	var recs []engine.AuditRecord
	for i, size := range []int{10, 5000, 3990, 1, 200, 9000, 9000, 0, 4000, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 2} {
		r := engine.AuditRecord{Position: uint64(i + 1), Topic: strings.Repeat("t", size), Outcome: "applied"}
		if err := engine.Seal(&r, head); err != nil {
			t.Fatal(err)
		}
		head = r.Hash
		recs = append(recs, r)
	}
	if got := len(chunkAudit(recs)); got < 8 {
		t.Fatalf("fixture makes %d chunks, want several", got)
	}
	for _, batch := range [][]engine.AuditRecord{recs[:3], recs[3:4], recs[4:]} {
		if err := s.Commit(t.Context(), &engine.Batch{Audit: batch}); err != nil {
			t.Fatal(err)
		}
	}
	for from := range uint64(len(recs) + 2) {
		next := max(from, 1)
		err := s.ScanAudit(t.Context(), from, func(r engine.AuditRecord) error {
			if r.Position != next || r.Topic != recs[next-1].Topic || r.Hash != recs[next-1].Hash {
				t.Fatalf("from %d: got record %d (%d byte topic), want %d", from, r.Position, len(r.Topic), next)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(len(recs)) + 1; next != max(want, from) {
			t.Errorf("from %d: scan stopped before %d, want %d", from, next, want)
		}
	}
}
