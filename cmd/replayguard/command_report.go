package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
)

func reportFlags(fs *flag.FlagSet) {
	fs.String("from", "", "first time: RFC 3339, or a duration back from now (2h)")
	fs.String("to", "", "end time (exclusive): RFC 3339, or a duration back from now")
	fs.String("route", "", "one route's decisions only")
	fs.String("o", "", "write to FILE instead of stdout")
	fs.String("format", "html", "html or json")
}

func cmdReport(e *env) error {
	if len(e.args) != 0 {
		return fmt.Errorf("%w: report takes no arguments", errUsage)
	}
	opts, err := reportOptions(e, time.Now())
	if err != nil {
		return err
	}
	format := e.flagString("format")
	if format != "html" && format != "json" {
		return fmt.Errorf("%w: --format wants html or json, not %q", errUsage, format)
	}
	rep, err := buildReport(e, opts)
	if err != nil {
		return err
	}
	out := e.stdout
	if path := e.flagString("o"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	if err := writeReport(out, rep, format); err != nil {
		return err
	}
	if f, ok := out.(*os.File); ok && out != e.stdout {
		return f.Close()
	}
	return nil
}

func writeReport(w io.Writer, rep *report.Report, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return report.RenderHTML(w, rep)
}

// reportOptions reads the flags and the configuration's digest.
func reportOptions(e *env, now time.Time) (report.Options, error) {
	opts := report.Options{Route: e.flagString("route"), Store: e.cfg.Store.Kind}
	var err error
	if opts.From, err = parseWhen(e.flagString("from"), now); err != nil {
		return opts, fmt.Errorf("%w: --from: %v", errUsage, err)
	}
	if opts.To, err = parseWhen(e.flagString("to"), now); err != nil {
		return opts, fmt.Errorf("%w: --to: %v", errUsage, err)
	}
	if !opts.From.IsZero() && !opts.To.IsZero() && !opts.From.Before(opts.To) {
		return opts, fmt.Errorf("%w: --from %s is not before --to %s", errUsage, opts.From.Format(time.RFC3339), opts.To.Format(time.RFC3339))
	}
	if opts.Route != "" && !e.hasRoute(opts.Route) {
		return opts, fmt.Errorf("%w: --route %q is not a route of %s", errUsage, opts.Route, e.cfgSrc)
	}
	if opts.ConfigDigest, err = configDigest(e); err != nil {
		return opts, err
	}
	return opts, nil
}

func (e *env) hasRoute(name string) bool {
	for _, r := range e.cfg.Routes {
		if r.Name == name {
			return true
		}
	}
	return false
}

// configDigest is the SHA-256 of the configuration as `config print`
// renders it.
func configDigest(e *env) (string, error) {
	b, err := e.cfg.Marshal()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// parseWhen reads an RFC 3339 time or a duration back from now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "-"))
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-11-30T12:00:00Z) nor a duration back from now (2h)", s)
	}
	return now.Add(-d), nil
}

// quarantineBases is a shared store that names its members' quarantine
// bases.
type quarantineBases interface {
	QuarantineBases(ctx context.Context) (map[string]uint64, error)
}

// buildReport reads the audit log read-only: a shared store's every
// chain, a single-owner store's log, or, when `run` holds the embedded
// store, the running process's API.
func buildReport(e *env, opts report.Options) (*report.Report, error) {
	a, err := openRead(e)
	if err != nil {
		r, rerr := e.remoteFor(err)
		if rerr != nil {
			return nil, rerr
		}
		opts.ReadPath = "through the API of the running process at " + e.cfg.HTTP.Listen + " (it holds the store)"
		return report.Build(report.Scanned(func(fn func(engine.AuditRecord) error) error { return r.audit(1, fn) }), opts)
	}
	defer a.Close()
	if cs := a.Store.Capabilities().Chains; cs != nil {
		recs, heads, err := report.Chains(e.ctx, cs)
		if err != nil {
			return nil, err
		}
		opts.Heads, opts.ReadPath = heads, "from the store, every member's chain"
		if qb, ok := a.Store.(quarantineBases); ok {
			if opts.QuarantineBases, err = qb.QuarantineBases(e.ctx); err != nil {
				return nil, err
			}
		}
		return report.Build(recs, opts)
	}
	snap, err := a.Snapshot(e.ctx)
	if err != nil {
		return nil, err
	}
	opts.Heads, opts.ReadPath = map[string]engine.AuditHead{"": snap.AuditHead}, "from the store"
	if t := a.Store.Capabilities().Trim; t != nil { // retention archived the oldest records
		base, err := t.AuditBase(e.ctx)
		if err != nil {
			return nil, err
		}
		opts.Bases = map[string]engine.AuditHead{"": base}
	}
	return report.Build(report.Records(e.ctx, a.Store), opts)
}
