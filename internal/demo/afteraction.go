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
	var b strings.Builder
	if err := app.WriteLineage(&b, ls[0]); err != nil {
		return
	}
	for line := range strings.Lines(b.String()) {
		if line = strings.TrimSuffix(line, "\n"); line == "" {
			d.out.plain("")
		} else {
			d.out.plain("    %s", line)
		}
	}
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
