package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
)

// openRead opens the store read-only.
func openRead(e *env) (*app.App, error) {
	return app.Open(e.ctx, e.cfg, app.Options{ReadOnly: true, Logger: e.log})
}

func cmdState(e *env) error {
	a, err := openRead(e)
	if err != nil {
		r, rerr := e.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		var state map[string]map[string]json.RawMessage
		if err := r.do("GET", "/api/v1/state", nil, &state); err != nil {
			return err
		}
		return printState(e, state)
	}
	defer a.Close()
	snap, err := a.Snapshot(e.ctx)
	if err != nil {
		return err
	}
	return printState(e, engine.StateJSON(snap.Entities))
}

func printState(e *env, state map[string]map[string]json.RawMessage) error {
	if e.flagBool("json") {
		return writeJSON(e, state)
	}
	names := make([]string, 0, len(state))
	for n := range state {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, n := range names {
		fields := make([]string, 0, len(state[n]))
		for k, v := range state[n] {
			fields = append(fields, k+"="+string(v))
		}
		sort.Strings(fields)
		fmt.Fprintf(tw, "%s\t%s\n", n, strings.Join(fields, " "))
	}
	return tw.Flush()
}

func cmdSources(e *env) error {
	a, err := openRead(e)
	if err != nil {
		r, rerr := e.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		var reps []engine.SourceReport
		if err := r.do("GET", "/api/v1/sources", nil, &reps); err != nil {
			return err
		}
		return printSources(e, reps)
	}
	defer a.Close()
	snap, err := a.Snapshot(e.ctx)
	if err != nil {
		return err
	}
	return printSources(e, engine.SourceReports(snap.Sources))
}

func printSources(e *env, reps []engine.SourceReport) error {
	if e.flagBool("json") {
		return writeJSON(e, reps)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	sessions := slices.ContainsFunc(reps, func(r engine.SourceReport) bool { return r.Sparkplug != nil })
	if sessions {
		fmt.Fprintln(tw, "ROUTE\tSOURCE\tEPOCH\tHIGH\tOPEN GAPS\tSESSION")
	} else {
		fmt.Fprintln(tw, "ROUTE\tSOURCE\tEPOCH\tHIGH\tOPEN GAPS")
	}
	for _, r := range reps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s", r.Route, strings.Join(r.Source, "/"), r.Epoch, r.High, gapText(r))
		if sessions {
			fmt.Fprintf(tw, "\t%s", sessionText(r.Sparkplug))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// sessionText describes a Sparkplug edge's session: online or offline,
// its bdSeq and when its last birth was applied.
func sessionText(s *engine.SparkplugReport) string {
	if s == nil {
		return "-"
	}
	state := "offline"
	if s.Online {
		state = "online"
	}
	return fmt.Sprintf("%s bdSeq %d, birth %s", state, s.BdSeq, s.LastBirth.Format(time.RFC3339))
}

func gapText(r engine.SourceReport) string {
	var parts []string
	for _, g := range r.Gaps {
		parts = append(parts, rangeText(g))
	}
	for _, o := range r.Older {
		for _, g := range o.Gaps {
			parts = append(parts, "epoch "+o.Epoch+": "+rangeText(g))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func rangeText(g engine.Range) string {
	if g.From == g.To {
		return fmt.Sprint(g.From)
	}
	return fmt.Sprintf("%d-%d", g.From, g.To)
}

func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
