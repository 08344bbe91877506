package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replayguard/replayguard/internal/app"
)

func reportFlags(fs *flag.FlagSet) {
	fs.String("from", "", "first time: RFC 3339, or a duration back from now (2h)")
	fs.String("to", "", "end time (exclusive): RFC 3339, or a duration back from now")
	fs.String("route", "", "one route's decisions only")
	fs.String("o", "", "write to FILE instead of stdout")
	fs.String("format", "html", "html or json")
	fs.String("archive", "", "the audit archive to read what retention moved out of the store from (default: audit.archive)")
	fs.Var(&entityList{}, "entity", "add a lineage section for entity `E` (named as state prints it); repeat it, or separate names with commas")
	tokenNameFlag(fs)
}

// entityList is --entity: repeated, or names separated by commas.
type entityList []string

func (l *entityList) String() string { return strings.Join(*l, ",") }

func (l *entityList) Set(s string) error {
	for name := range strings.SplitSeq(s, ",") {
		if name = strings.TrimSpace(name); name == "" {
			return fmt.Errorf("an empty entity name in %q", s)
		}
		*l = append(*l, name)
	}
	return nil
}

func cmdReport(e *env) error {
	if len(e.args) != 0 {
		return fmt.Errorf("%w: report takes no arguments", errUsage)
	}
	opts, err := reportOptions(e, time.Now())
	if err != nil {
		return err
	}
	if opts.Format != "html" && opts.Format != "json" {
		return fmt.Errorf("%w: --format wants html or json, not %q", errUsage, opts.Format)
	}
	return e.tool().Report(e.ctx, opts)
}

// reportOptions reads the flags.
func reportOptions(e *env, now time.Time) (app.ReportOptions, error) {
	opts := app.ReportOptions{Route: e.flagString("route"), Format: e.flagString("format"), Output: e.flagString("o"), Archive: e.flagString("archive"),
		Entities: *e.flags.Lookup("entity").Value.(*entityList)}
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
	if st, err := os.Stat(opts.Output); opts.Output != "" && err == nil && st.IsDir() {
		return opts, fmt.Errorf("%w: -o %s is a directory: name the file to write, like %s", errUsage, opts.Output, filepath.Join(opts.Output, "review.html"))
	}
	if opts.Route != "" && !e.hasRoute(opts.Route) {
		return opts, fmt.Errorf("%w: --route %q is not a route of %s", errUsage, opts.Route, e.cfgSrc)
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
