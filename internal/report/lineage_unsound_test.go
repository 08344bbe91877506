package report_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// A lineage is read from the log as it was written or not at all: a record
// whose content no longer matches its hash (a value changed in the store),
// a log that ends before the chain head the store keeps (its tail
// removed) or at another record than the head names, and a first record
// that links to something before it are breaks (audit.ErrBroken) naming
// the position, never a lineage that shows an altered value, or fewer
// changes, as sound.
func TestALineageFromAnAlteredOrCutLogIsAnError(t *testing.T) {
	ctx := context.Background()
	s, _, _, _ := lineageFeed(t, 3, 25)
	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := snap.AuditHead
	heads := map[string]engine.AuditHead{"": last}
	var recs []engine.AuditRecord
	if err := s.ScanAudit(ctx, 1, func(r engine.AuditRecord) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	// A record that changed an entity, well before the head.
	i := slices.IndexFunc(recs[len(recs)/2:], func(r engine.AuditRecord) bool { return len(r.Effects) > 0 }) + len(recs)/2
	changed := recs[i]
	if len(changed.Effects) == 0 || changed.Position >= last.Position-1 {
		t.Fatalf("no record with effects before the head to alter (head %d)", last.Position)
	}
	entity := changed.Effects[0].Entity
	opts := report.LineageOptions{Entities: []string{entity}, Heads: heads}
	whole, err := report.Lineages(report.Scanned(scan(recs)), opts)
	if err != nil || len(whole[0].Changes) == 0 {
		t.Fatalf("the log as written: %v, %v", whole, err)
	}

	altered := slices.Clone(recs)
	altered[i].Effects = slices.Clone(changed.Effects)
	altered[i].Effects[0].Value, altered[i].Effects[0].After = json.RawMessage("99"), json.RawMessage("99")
	firstPrev := slices.Clone(recs)
	firstPrev[0].Prev = engine.Hash{7}
	for _, c := range []struct {
		name  string
		recs  []engine.AuditRecord
		heads map[string]engine.AuditHead
		want  string
	}{
		{"a value altered", altered, nil,
			fmt.Sprintf("broken at position %d: hash does not match the record's content (altered)", changed.Position)},
		{"the last record removed", recs[:len(recs)-1], heads,
			fmt.Sprintf("broken at position %d: log ends at position %d but the chain head is at %d", last.Position, last.Position-1, last.Position)},
		{"the records from a change on removed", recs[:i], heads,
			fmt.Sprintf("broken at position %d: log ends at position %d but the chain head is at %d", changed.Position, changed.Position-1, last.Position)},
		{"a head the log does not end at", recs, map[string]engine.AuditHead{"": {Position: last.Position, Hash: engine.Hash{9}}},
			fmt.Sprintf("broken at position %d: the last record's hash does not match the chain head", last.Position)},
		{"a first record that links to one before it", firstPrev, nil, "broken at position 1: prev does not match"},
	} {
		ls, err := report.Lineages(report.Scanned(scan(c.recs)), report.LineageOptions{Entities: []string{entity}, Heads: c.heads})
		if !errors.Is(err, audit.ErrBroken) || !strings.Contains(err.Error(), c.want) {
			n := -1
			if ls != nil {
				n = len(ls[0].Changes)
			}
			t.Errorf("%s: a lineage of %d changes, err %v; want a break saying %q", c.name, n, err, c.want)
		}
	}
}
