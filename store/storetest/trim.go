package storetest

import (
	"errors"
	"testing"

	"github.com/replayguard/replayguard/engine"
)

// trimmedLog commits 300 records in batches of 100, 150 and 50, so that a
// trim cuts inside a batch's records.
func trimmedLog(t *testing.T, s *handle) []engine.AuditRecord {
	t.Helper()
	c := s.chain()
	var all []engine.AuditRecord
	for _, n := range []int{100, 150, 50} {
		recs := c.records(t, n)
		commit(t, s, &engine.Batch{Audit: recs})
		all = append(all, recs...)
	}
	return all
}

func baseOf(r engine.AuditRecord) engine.AuditHead {
	return engine.AuditHead{Position: r.Position, Hash: r.Hash}
}

func testTrim(t *testing.T, s *handle) {
	tr := s.caps.Trim
	all := trimmedLog(t, s)
	if b, err := tr.AuditBase(t.Context()); err != nil || b != (engine.AuditHead{}) {
		t.Fatalf("AuditBase before a trim = %v, %v; want zero", b, err)
	}
	for _, below := range []uint64{120, 121, 251} { // inside a batch, the next record, a batch's first
		if err := tr.TrimAudit(t.Context(), below, baseOf(all[below-2])); err != nil {
			t.Fatalf("TrimAudit(%d): %v", below, err)
		}
		if b, err := tr.AuditBase(t.Context()); err != nil || b != baseOf(all[below-2]) {
			t.Fatalf("AuditBase after trimming below %d = %v, %v", below, b, err)
		}
		got := scanAudit(t, s, 0)
		if len(got) != len(all)-int(below)+1 || got[0].Position != below || got[0].Prev != all[below-2].Hash {
			t.Fatalf("after trimming below %d the log holds %d records from %d; want %d from %d linked to the base",
				below, len(got), got[0].Position, len(all)-int(below)+1, below)
		}
		if mid := scanAudit(t, s, below+10); len(mid) == 0 || mid[0].Position != below+10 {
			t.Fatalf("ScanAudit(%d) after the trim starts at %v", below+10, mid)
		}
	}
	if head := load(t, s).AuditHead; head != baseOf(all[len(all)-1]) {
		t.Fatalf("the chain head moved with the trim: %v", head)
	}
	c := chain{head: baseOf(all[len(all)-1]), member: s.member}
	more := c.records(t, 5)
	commit(t, s, &engine.Batch{Audit: more})
	if got := scanAudit(t, s, 0); got[len(got)-1].Position != 305 || len(got) != 55 {
		t.Fatalf("after a commit on the trimmed log: %d records up to %d", len(got), got[len(got)-1].Position)
	}
}

func testTrimRefuses(t *testing.T, s *handle) {
	tr := s.caps.Trim
	all := trimmedLog(t, s)
	commit(t, s, &engine.Batch{Quarantine: []engine.QuarantineEntry{quarantineEntry(s.q(200), []byte(`{}`))}})
	wrong := baseOf(all[98])
	wrong.Hash[0] ^= 1
	cases := []struct {
		name  string
		below uint64
		base  engine.AuditHead
		want  error
	}{
		{"a base whose hash is not the stored record's", 100, wrong, engine.ErrTrimBase},
		{"a base that is not the record below the trim", 100, baseOf(all[97]), engine.ErrTrimBase},
		{"a base beyond the chain head", 302, engine.AuditHead{Position: 301}, engine.ErrTrimBase},
		{"a trim that drops an open quarantine entry's record", 202, baseOf(all[200]), engine.ErrTrimQuarantine},
	}
	before := readState(t, s)
	for _, tc := range cases {
		if err := tr.TrimAudit(t.Context(), tc.below, tc.base); !errors.Is(err, tc.want) {
			t.Errorf("%s: TrimAudit(%d) = %v, want %v", tc.name, tc.below, err, tc.want)
		}
	}
	if after := readState(t, s); len(after.Audit) != len(before.Audit) {
		t.Fatalf("a refused trim changed the log: %d records, were %d", len(after.Audit), len(before.Audit))
	}
	if err := tr.TrimAudit(t.Context(), 200, baseOf(all[198])); err != nil {
		t.Fatalf("a trim up to the quarantined record: %v", err)
	}
	if err := tr.TrimAudit(t.Context(), 150, baseOf(all[148])); !errors.Is(err, engine.ErrTrimBase) {
		t.Fatalf("a trim below the base = %v, want ErrTrimBase", err)
	}
	commit(t, s, &engine.Batch{Resolved: []uint64{s.q(200)}})
	if err := tr.TrimAudit(t.Context(), 301, baseOf(all[299])); err != nil {
		t.Fatalf("a trim of everything once the entry is resolved: %v", err)
	}
	if got := scanAudit(t, s, 0); len(got) != 0 {
		t.Fatalf("a log trimmed to its head still holds %d records", len(got))
	}
}
