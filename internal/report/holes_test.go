package report_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// TestAReportNamesWhereTheMissingPositionsShouldBe: positions that neither
// the archive nor the store gives are named as missing from the one that
// should hold them, by the store's base (the last position retention moved
// out of it): at or below it the archive, above it the store, which never
// moved them. A complete archive is never blamed for the store's loss.
func TestAReportNamesWhereTheMissingPositionsShouldBe(t *testing.T) {
	ctx := context.Background()
	all, base, head := trimmedLog(t, "") // archived 1..6: base 6, head 10
	stored := func(positions ...uint64) []engine.AuditRecord {
		var out []engine.AuditRecord
		for _, p := range positions {
			out = append(out, all[p-1])
		}
		return out
	}
	for _, c := range []struct {
		name     string
		archived []engine.AuditRecord
		stored   []engine.AuditRecord
		want     string
		notWant  string
	}{
		{"a hole between the archive's end and the store's first record", all[:6], stored(9, 10),
			"broken at position 7: positions 7..8 are missing from the store: they follow the store's base, position 6", "from the archive"},
		{"a hole within the store", all[:6], stored(7, 9, 10),
			"broken at position 8: position 8 is missing from the store: it follows the store's base, position 6", "from the archive"},
		{"an archive without its last segment", all[:4], stored(7, 8, 9, 10),
			"broken at position 5: positions 5..6 are missing from the archive dir: audit retention moved them out of the store (its base is position 6)", "from the store"},
		{"both", all[:4], stored(9, 10),
			"broken at position 5: positions 5..6 are missing from the archive dir: audit retention moved them out of the store (its base is position 6); " +
				"audit verify --archive names the missing segment; and positions 7..8 are missing from the store", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := report.Build(report.Scanned(report.WithArchive(ctx, "", archiveOf("", c.archived), scan(c.stored))),
				report.Options{Heads: map[string]engine.AuditHead{"": head}, Bases: map[string]engine.AuditHead{"": base}, Archive: "dir"})
			if err != nil {
				t.Fatal(err)
			}
			got := rep.Verification.Chains[0].Broken
			if rep.Verification.Intact || !strings.Contains(got, c.want) || (c.notWant != "" && strings.Contains(got, c.notWant)) {
				t.Fatalf("the chain is %q; want it broken saying %q, and nothing %q", got, c.want, c.notWant)
			}
		})
	}
	t.Run("a store never trimmed that lost its first records", func(t *testing.T) {
		_, err := report.Build(report.Scanned(scan(all[3:])), report.Options{Heads: map[string]engine.AuditHead{"": head}, Bases: map[string]engine.AuditHead{}})
		want := "positions 1..3 are missing from the store: audit retention never moved a record of the chain out of the store; the store lost them"
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "archived them") {
			t.Fatalf("err %v; want %q", err, want)
		}
	})
	t.Run("the lineages read a break of the chain, the store's", func(t *testing.T) {
		recs := report.Scanned(report.WithArchive(ctx, "", archiveOf("", all[:6]), scan(stored(9, 10))))
		_, err := report.Lineages(recs, report.LineageOptions{Entities: []string{"incident/7"}, Bases: map[string]engine.AuditHead{"": base}})
		want := "the audit chain: positions 7..8 were not read: audit chain broken at position 7: positions 7..8 are missing from the store"
		if !errors.Is(err, audit.ErrBroken) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "the archive lacks") {
			t.Fatalf("err %v; want a break (audit.ErrBroken) saying %q", err, want)
		}
	})
	t.Run("without the bases, neither is blamed", func(t *testing.T) {
		recs := report.Scanned(report.WithArchive(ctx, "", archiveOf("", all[:6]), scan(slices.Clone(stored(9, 10)))))
		_, err := report.Lineages(recs, report.LineageOptions{Entities: []string{"incident/7"}})
		if err == nil || !strings.Contains(err.Error(), "positions 7..8 were not read: neither the archive nor the store holds them") {
			t.Fatalf("err %v; want the positions named, neither blamed", err)
		}
	})
}
