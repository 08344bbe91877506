package demo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	aar "github.com/replayguard/replayguard/internal/report"
)

// writeReport writes the after-action report of replayguard's store to
// Options.Report and says where.
func (d *demo) writeReport(ctx context.Context) {
	if d.opts.Report == "" {
		return
	}
	path, err := filepath.Abs(d.opts.Report)
	if err == nil {
		err = d.renderReport(ctx, path)
	}
	if err != nil {
		d.out.plain("\n  The after-action report could not be written: %v", err)
		return
	}
	d.out.plain("\n  The after-action report of replayguard's audit log: %s", path)
}

// sayLineage prints the lineage of the story's entity from replayguard's
// audit log, as `replayguard explain` prints it: each change, with the
// replays suppressed beside it.
func (d *demo) sayLineage(ctx context.Context) {
	if d.story.lineage == "" {
		return
	}
	ls, err := aar.Lineages(aar.Records(ctx, d.guard.store, nil), aar.LineageOptions{Entities: []string{d.story.lineage}})
	if err == nil && len(ls[0].Changes) == 0 {
		err = fmt.Errorf("no decision changed it")
	}
	if err != nil {
		d.out.plain("\n  The lineage of %s could not be read: %v", d.story.lineage, err)
		return
	}
	d.out.plain("\n  Why replayguard's %s is right: its lineage from the audit log (replayguard explain %s)\n", d.story.lineage, d.story.lineage)
	l, all := ls[0], len(ls[0].Changes)
	shown := replayedChanges(l.Changes)
	if all > lineageShown {
		l.Changes = shown
	}
	var b strings.Builder
	if err := app.WriteLineage(&b, l); err != nil {
		return
	}
	text := b.String()
	if all > lineageShown { // the header counts every change; the rest are explain's
		_, rest, _ := strings.Cut(text, "\n")
		replays := "replays"
		if l.Suppressed == 1 {
			replays = "replay"
		}
		text = fmt.Sprintf("%s: %d changes, %d %s suppressed; shown: the %d the replays came for, and the last\n", l.Entity, all, l.Suppressed, replays, len(shown)-1) + rest
	}
	for line := range strings.Lines(text) {
		if line = strings.TrimSuffix(line, "\n"); line == "" {
			d.out.plain("")
		} else {
			d.out.plain("    %s", line)
		}
	}
}

// lineageShown is how many changes of a lineage the demo prints: past it,
// those the replays came for and the last (a meter's lineage holds a change
// for each reading).
const lineageShown = 12

// replayedChanges returns the changes that replays or held copies came
// for, at most lineageShown-1 of them, and the last change.
func replayedChanges(cs []aar.Change) []aar.Change {
	var out []aar.Change
	for _, c := range cs[:len(cs)-1] {
		if (len(c.Suppressed) > 0 || len(c.Held) > 0) && len(out) < lineageShown-1 {
			out = append(out, c)
		}
	}
	return append(out, cs[len(cs)-1])
}

func (d *demo) renderReport(ctx context.Context, path string) error {
	snap, err := d.guard.store.Load(ctx)
	if err != nil {
		return err
	}
	opts := aar.Options{Heads: map[string]engine.AuditHead{"": snap.AuditHead}, Store: "embedded",
		ReadPath: "from the demo's store"}
	if b, err := d.guard.cfg.Marshal(); err == nil {
		sum := sha256.Sum256(b)
		opts.ConfigDigest = hex.EncodeToString(sum[:])
	}
	rep, err := aar.Build(aar.Records(ctx, d.guard.store, nil), opts)
	if err != nil {
		return err
	}
	if len(rep.Replayed) > 0 {
		names := make([]string, len(rep.Replayed))
		for i, r := range rep.Replayed {
			names[i] = r.Entity
		}
		if rep.Lineages, err = aar.Lineages(aar.Records(ctx, d.guard.store, nil), aar.LineageOptions{Entities: names}); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := aar.RenderHTML(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
