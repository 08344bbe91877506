package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/app"
)

// Set at build time: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

func cmdLint(e *env) error {
	// loadConfig already checked every section and what run needs on top
	// (config.LoadRun), and listed every problem with its line.
	printWarnings(e, e.cfg.Warnings())
	problems, skipped := app.CheckSQL(e.ctx, e.cfg)
	problems = append(app.CheckLocal(e.cfg), problems...)
	derived, unread := app.CheckKeyDerivations(e.ctx, e.cfg)
	problems = append(problems, derived...)
	stream, subjectWarnings, unasked := app.CheckJetStream(e.ctx, e.cfg)
	problems = append(problems, stream...)
	printWarnings(e, subjectWarnings)
	slices.SortStableFunc(problems, func(a, b config.Problem) int { return a.Line - b.Line })
	if len(problems) > 0 {
		return &config.ValidationError{File: e.cfgSrc, Problems: problems}
	}
	if skipped != nil {
		fmt.Fprintf(e.stdout, "%s: sql statements not checked against the database: %v\n", e.cfgSrc, skipped)
	}
	if unread != nil {
		fmt.Fprintf(e.stdout, "%s: key derivations not checked against the store's record: %v\n", e.cfgSrc, unread)
	}
	if unasked != nil {
		fmt.Fprintf(e.stdout, "%s: the stream's subjects not checked against the routes: %v (run's bind logs each subject the consumer takes with the routes that match it, and warns of one no route matches)\n", e.cfgSrc, unasked)
	}
	fmt.Fprintf(e.stdout, "%s: ok (%s)\n", e.cfgSrc, counted(int64(len(e.cfg.Routes)), "route", "routes"))
	return nil
}

// printWarnings prints ws on stdout, each with its file and line.
func printWarnings(e *env, ws []config.Problem) {
	for _, w := range ws {
		at := e.cfgSrc
		if w.Line > 0 {
			at += ":" + strconv.Itoa(w.Line)
		}
		fmt.Fprintf(e.stdout, "%s: warning: %s\n", at, w)
	}
}

func cmdConfig(e *env) error {
	if len(e.args) != 1 || e.args[0] != "print" {
		return fmt.Errorf("%w: config takes print", errUsage)
	}
	b, err := e.cfg.Marshal()
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}

func cmdVersion(e *env) error {
	fmt.Fprintf(e.stdout, "replayguard %s (commit %s, %s)\n", version, buildCommit(), runtime.Version())
	return nil
}

func buildCommit() string {
	if commit != "" {
		return commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
