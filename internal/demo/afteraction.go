package demo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/replayguard/replayguard/engine"
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
