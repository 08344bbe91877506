package report_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// scan is a store's or an archive's part of a chain.
func scan(recs []engine.AuditRecord) func(fn func(engine.AuditRecord) error) error {
	return func(fn func(engine.AuditRecord) error) error {
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// archiveOf is an archive holding recs of member.
func archiveOf(member string, recs []engine.AuditRecord) report.Archive {
	return func(_ context.Context, m string, fn func(engine.AuditRecord) error) error {
		if m != member {
			return nil
		}
		return scan(recs)(fn)
	}
}

// trimmedLog is ten decisions of one chain, a minute apart, of which audit
// retention archived positions 1..6: the store keeps 7..10, its base is 6.
func trimmedLog(t *testing.T, member string) (all []engine.AuditRecord, base, head engine.AuditHead) {
	var recs []engine.AuditRecord
	for i := range 10 {
		outcome := "applied"
		if i%4 == 3 {
			outcome = "duplicate"
		}
		recs = append(recs, rec(60*i, outcome, primary, int64(i+1)))
	}
	all = chain(t, member, recs...)
	return all, engine.AuditHead{Position: 6, Hash: all[5].Hash}, engine.AuditHead{Position: 10, Hash: all[9].Hash}
}

func TestAReportReadsTheArchiveBeforeTheStore(t *testing.T) {
	ctx := context.Background()
	all, base, head := trimmedLog(t, "")
	opts := func(archive string) report.Options {
		return report.Options{Heads: map[string]engine.AuditHead{"": head}, Bases: map[string]engine.AuditHead{"": base}, Archive: archive}
	}
	build := func(archive report.Archive, stored []engine.AuditRecord, o report.Options) (*report.Report, error) {
		return report.Build(report.Scanned(report.WithArchive(ctx, "", archive, scan(stored))), o)
	}
	t.Run("without the archive, a period reaching before the store is an error naming the positions", func(t *testing.T) {
		for _, o := range []report.Options{opts(""), {Bases: opts("").Bases, From: all[6].Time}, {Bases: opts("").Bases, To: all[2].Time}} {
			rep, err := build(nil, all[6:], o)
			if err == nil || !strings.Contains(err.Error(), "positions 1..6 are not in the store") || !strings.Contains(err.Error(), "--archive DIR") {
				t.Fatalf("from %v to %v: report %v, err %v; want the missing positions named", o.From, o.To, rep, err)
			}
		}
	})
	t.Run("a period after the store's first record needs no archive", func(t *testing.T) {
		o := opts("")
		o.From = all[6].Time.Add(time.Second)
		rep, err := build(nil, all[6:], o)
		if err != nil {
			t.Fatal(err)
		}
		c := rep.Verification.Chains[0]
		if !rep.Verification.Intact || c.Records != 4 || c.FirstPosition != 7 || c.Archived != 0 || rep.Totals.Outcomes.Total() != 3 {
			t.Fatalf("%+v, totals %+v: want the 4 stored records verified from the base, 3 in the period", rep.Verification, rep.Totals)
		}
	})
	for _, tc := range []struct {
		name    string
		archive []engine.AuditRecord
	}{
		{"with the archive, every decision is counted once and the chain verified from position 1", all[:6]},
		{"a record both the archive and the store hold is read once", all[:8]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := build(archiveOf("", tc.archive), all[6:], opts("/var/lib/replayguard/archive"))
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Verification.Chains[0]
			if !rep.Verification.Intact || c.Records != 10 || c.FirstPosition != 1 || c.LastPosition != 10 || c.Archived != 6 ||
				!c.First.Equal(all[0].Time) || !c.Last.Equal(all[9].Time) || rep.Archive != "/var/lib/replayguard/archive" {
				t.Fatalf("%+v: want one intact chain of 10 records, 1..6 from the archive", rep.Verification)
			}
			if o := rep.Totals.Outcomes; o.Applied != 8 || o.Duplicate != 2 || o.Total() != 10 {
				t.Fatalf("totals %+v, want the 10 decisions: 8 applied, 2 duplicate", o)
			}
		})
	}
	t.Run("a stored record that differs from the archive's is an error", func(t *testing.T) {
		altered := append([]engine.AuditRecord(nil), all[6:]...)
		altered[1].Hash[0] ^= 1 // position 8, which the archive holds too
		if _, err := build(archiveOf("", all[:8]), altered, opts("dir")); err == nil || !strings.Contains(err.Error(), "position 8 differs from the archive's") {
			t.Fatalf("err %v, want the differing record named", err)
		}
	})
	t.Run("an archive without the chain's first positions is an error naming them", func(t *testing.T) {
		if _, err := build(archiveOf("", nil), all[6:], opts("dir")); err == nil || !strings.Contains(err.Error(), "positions 1..6 of the audit chain are in neither the archive dir nor the store") {
			t.Fatalf("err %v, want the missing positions named", err)
		}
	})
}

func TestAGroupReportReadsEachMembersArchive(t *testing.T) {
	ctx := context.Background()
	a, baseA, headA := trimmedLog(t, "a")
	b := chain(t, "b", rec(30, "applied", primary, 1), rec(90, "duplicate", primary, 1))
	g := group{"a": a[6:], "b": b} // what the store holds
	recs, _, err := report.Chains(ctx, g, archiveOf("a", a[:6]))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(recs, report.Options{Bases: map[string]engine.AuditHead{"a": baseA}, Archive: "dir",
		Heads: map[string]engine.AuditHead{"a": headA, "b": {Position: 2, Hash: b[1].Hash}}})
	if err != nil {
		t.Fatal(err)
	}
	v := rep.Verification
	if !v.Intact || len(v.Chains) != 2 || v.Chains[0].Records != 10 || v.Chains[0].Archived != 6 || v.Chains[1].Records != 2 || v.Chains[1].Archived != 0 {
		t.Fatalf("%+v: want a's 10 records (6 archived) and b's 2, intact", v)
	}
	if o := rep.Totals.Outcomes; o.Applied != 9 || o.Duplicate != 3 {
		t.Fatalf("totals %+v, want 9 applied and 3 duplicates", o)
	}
	recs, _, _ = report.Chains(ctx, g, nil)
	if _, err := report.Build(recs, report.Options{Bases: map[string]engine.AuditHead{"a": baseA}}); err == nil || !strings.Contains(err.Error(), `the first record the store holds of member "a"'s chain (position 7`) {
		t.Fatalf("without the archive: %v, want member a's missing positions named", err)
	}
}
