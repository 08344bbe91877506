package app

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

// ReportOptions say what Report covers and how it writes it.
type ReportOptions struct {
	// From and To bound the period: a decision counts when From <= time
	// < To. Zero: unbounded on that side.
	From, To time.Time
	// Route keeps only that route's decisions; empty: every route.
	Route string
	// Format is "json" for the report's JSON form; anything else renders
	// HTML.
	Format string
	// Output is the file to write; empty: Tool.Out. The file is created
	// only once the report is built.
	Output string
	// Archive is the audit archive to read the records audit retention
	// moved out of the store from; empty: audit.archive of the
	// configuration, if any.
	Archive string
	// Entities get a lineage section each, before those of the most
	// replayed entities; an entity no decision changed is an error.
	Entities []string
}

// Report builds the after-action report from the audit log, read-only (a
// shared store's every chain, a single-owner store's log, or, when `run`
// holds the embedded store, the running process's API), and writes it.
func (t *Tool) Report(ctx context.Context, opts ReportOptions) error {
	ro := report.Options{From: opts.From, To: opts.To, Route: opts.Route, Store: t.Config.Store.Kind, Archive: cmp.Or(opts.Archive, t.Config.Audit.Archive)}
	if opts.Archive != "" { // named: it must be there (audit.archive is made by the first trim)
		if _, err := os.Stat(opts.Archive); err != nil {
			return fmt.Errorf("--archive: %w", err)
		}
	}
	var err error
	if ro.ConfigDigest, err = configDigest(t.Config); err != nil {
		return err
	}
	rep, err := t.buildReport(ctx, ro)
	if err != nil {
		return err
	}
	if err := t.reportLineages(ctx, rep, opts.Entities, ro.Archive, opts.To); err != nil {
		return err
	}
	if opts.Output == "" {
		return writeReport(t.Out, rep, opts.Format)
	}
	return writeFileWhole(opts.Output, func(w io.Writer) error { return writeReportTo(w, rep, opts.Format) })
}

// writeReportTo writes the report; a variable so that a test can make the
// write fail part way, as a full disk does.
var writeReportTo = writeReport

// writeFileWhole writes path through a temporary file beside it, synced
// and renamed into place only once write and the sync succeeded: a write
// that fails (a full disk) leaves no truncated file under path that reads
// as the whole, and an earlier file at path as it was. What it replaces
// keeps what os.Create would have kept: a symlink at path is written
// through (the file it names is replaced, beside it), an earlier file's
// permissions are the report's, and a new file has 0666 less the umask.
func writeFileWhole(path string, write func(io.Writer) error) error {
	target := path
	if p, err := filepath.EvalSymlinks(path); err == nil {
		target = p
	}
	perm, keep := os.FileMode(0o666), false
	if fi, err := os.Stat(target); err == nil {
		perm, keep = fi.Mode().Perm(), true
	}
	f, err := createBeside(target, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = write(f)
	if err == nil && keep { // the umask narrowed what the earlier file had
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), target)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// createBeside creates a new temporary file in path's directory with perm
// less the umask (os.CreateTemp's are 0600 whatever the umask).
func createBeside(path string, perm os.FileMode) (*os.File, error) {
	dir, base := filepath.Split(path)
	for try := 0; ; try++ {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == 100 {
			return f, err
		}
	}
}

// reportLineages gives rep a lineage section for each of the named
// entities, then for each of the most replayed, up to the period's end.
func (t *Tool) reportLineages(ctx context.Context, rep *report.Report, named []string, archive string, to time.Time) error {
	var entities []string
	for _, name := range named {
		if !slices.Contains(entities, name) {
			entities = append(entities, name)
		}
	}
	nNamed := len(entities)
	for _, r := range rep.Replayed {
		if !slices.Contains(entities, r.Entity) {
			entities = append(entities, r.Entity)
		}
	}
	if len(entities) == 0 {
		return nil
	}
	var at time.Time
	if !to.IsZero() {
		at = to.Add(-time.Nanosecond) // the period ends before To
	}
	ls, err := t.Lineages(ctx, report.LineageOptions{Entities: entities, At: at, Keep: reportChanges}, archive)
	if (errors.Is(err, report.ErrChainTrimmed) || errors.Is(err, report.ErrChainBroken) || errors.Is(err, audit.ErrBroken)) && nNamed == 0 {
		// A period after the store's first record needs no archive; the
		// lineages of its most replayed entities do. A chain that does not
		// link, or whose records the store holds outside every chain, is
		// the report's to show (its verification): no lineage is read.
		fmt.Fprintf(t.errOut(), "note: the lineages of the most replayed entities are left out: %v\n", err)
		return nil
	}
	var unchanged *errUnchanged
	if errors.As(err, &unchanged) { // read by the running process: a named entity's
		return fmt.Errorf("--entity %s: %w", unchanged.entity, err)
	}
	if err != nil {
		return err
	}
	for _, l := range ls[:nNamed] {
		if len(l.Changes) == 0 {
			return fmt.Errorf("--entity %s: %w", l.Entity, explainNone(l))
		}
	}
	for _, l := range ls {
		l.Trim(reportChanges) // a busy meter's whole lineage is explain's to show
	}
	rep.Lineages = ls
	return nil
}

// reportChanges bounds the changes a lineage section of the report shows:
// the last ones.
const reportChanges = 200

func writeReport(w io.Writer, rep *report.Report, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return report.RenderHTML(w, rep)
}

// configDigest is the SHA-256 of the configuration as `config print`
// renders it, secrets redacted: a reviewer checks it against config print
// without them, and a report that is passed around never lets a secret be
// guessed from its digest. A changed secret, as a changed URL password,
// leaves the digest as it was.
func configDigest(cfg *config.Config) (string, error) {
	b, err := cfg.Marshal()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// quarantineBases is a shared store that names its members' quarantine
// bases.
type quarantineBases interface {
	QuarantineBases(ctx context.Context) (map[string]uint64, error)
}

// buildReport reads the audit log read-only: a shared store's every
// chain, a single-owner store's log, or the running process's API.
func (t *Tool) buildReport(ctx context.Context, opts report.Options) (*report.Report, error) {
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return nil, rerr
		}
		opts.ReadPath = "through the API of the running process at " + t.Config.HTTP.Listen + " (it holds the store)"
		// The report covers the log up to the head the process committed
		// when it began, checked against that head as a store read
		// directly is; records committed meanwhile are past it.
		head, hashed, base, err := r.head()
		if err != nil {
			return nil, err
		}
		if hashed {
			opts.Heads = map[string]engine.AuditHead{"": head}
		}
		// Where retention left the chain beginning, as the API says it; from
		// a build that does not, the store's first record's prev is its base,
		// as audit verify through the API takes it then.
		bases, first := map[string]engine.AuditHead{}, base == nil
		if base != nil && base.Position > 0 {
			bases[""] = *base
		}
		opts.Bases = bases
		pastHead := errors.New("past the head")
		return report.Build(report.Scanned(report.WithArchive(ctx, "", archiveReader(opts.Archive),
			func(fn func(engine.AuditRecord) error) error {
				err := r.audit(1, func(rec engine.AuditRecord) error {
					if rec.Position > head.Position {
						return pastHead
					}
					if first && rec.Position > 1 {
						bases[""] = engine.AuditHead{Position: rec.Position - 1, Hash: rec.Prev}
					}
					first = false
					return fn(rec)
				})
				if errors.Is(err, pastHead) {
					return nil
				}
				return err
			})), opts)
	}
	defer a.Close()
	if cs := a.Store.Capabilities().Chains; cs != nil {
		recs, heads, err := report.Chains(ctx, cs, archiveReader(opts.Archive))
		if err != nil {
			return nil, err
		}
		opts.Heads, opts.ReadPath = heads, "from the store, every member's chain"
		if opts.StoreBroken, err = strayChains(ctx, cs); err != nil {
			return nil, err
		}
		if opts.Bases, err = trimmedChains(ctx, a.Store); err != nil { // retention archived their oldest records
			return nil, err
		}
		if qb, ok := a.Store.(quarantineBases); ok {
			if opts.QuarantineBases, err = qb.QuarantineBases(ctx); err != nil {
				return nil, err
			}
		}
		return report.Build(recs, opts)
	}
	head, err := a.AuditHead(ctx)
	if err != nil {
		return nil, err
	}
	opts.Heads, opts.ReadPath = map[string]engine.AuditHead{"": head}, "from the store"
	if tr := a.Store.Capabilities().Trim; tr != nil { // retention archived the oldest records
		base, err := tr.AuditBase(ctx)
		if err != nil {
			return nil, err
		}
		opts.Bases = map[string]engine.AuditHead{"": base}
	}
	return report.Build(report.Records(ctx, a.Store, archiveReader(opts.Archive)), opts)
}

// strayChains is the chain whose records the store holds outside every
// chain it lists, with why, as audit verify reports it (audit.CheckStray);
// nil when there is none.
func strayChains(ctx context.Context, cs engine.ChainScanner) (map[string]string, error) {
	var b *audit.BrokenError
	if err := audit.CheckStray(ctx, cs); !errors.As(err, &b) {
		return nil, err
	}
	return map[string]string{b.Member: fmt.Sprintf("at position %d: %s", b.Position, b.Reason)}, nil
}

// archiveReader reads the chains of audit archive dir, each record
// verified, across a missing segment, whose positions the report names as
// a break (audit.ScanArchiveAcrossHoles); nil when dir is empty.
func archiveReader(dir string) report.Archive {
	if dir == "" {
		return nil
	}
	return func(ctx context.Context, member string, fn func(engine.AuditRecord) error) error {
		_, err := audit.ScanArchiveAcrossHoles(ctx, dir, member, fn)
		return err
	}
}
