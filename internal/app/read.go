package app

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// State prints every entity's state, one line each (asJSON: one JSON
// object), from the store or through the API of the process holding it.
func (t *Tool) State(ctx context.Context, asJSON bool) error {
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		var state map[string]map[string]json.RawMessage
		if err := r.do("GET", "/api/v1/state", nil, &state); err != nil {
			return err
		}
		return t.printState(state, asJSON)
	}
	defer a.Close()
	snap, err := a.Snapshot(ctx)
	if err != nil {
		return err
	}
	return t.printState(engine.StateJSON(snap.Entities), asJSON)
}

func (t *Tool) printState(state map[string]map[string]json.RawMessage, asJSON bool) error {
	if asJSON {
		return t.writeJSON(state)
	}
	names := make([]string, 0, len(state))
	for n := range state {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(t.Out, 0, 4, 2, ' ', 0)
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

// Sources prints every source's window (epoch, high-water, open gaps and
// a Sparkplug edge's session), as a table or (asJSON) a JSON array.
func (t *Tool) Sources(ctx context.Context, asJSON bool) error {
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		var reps []engine.SourceReport
		if err := r.do("GET", "/api/v1/sources", nil, &reps); err != nil {
			return err
		}
		return t.printSources(reps, asJSON)
	}
	defer a.Close()
	snap, err := a.Snapshot(ctx)
	if err != nil {
		return err
	}
	return t.printSources(engine.SourceReports(snap.Sources), asJSON)
}

func (t *Tool) printSources(reps []engine.SourceReport, asJSON bool) error {
	if asJSON {
		return t.writeJSON(reps)
	}
	tw := tabwriter.NewWriter(t.Out, 0, 4, 2, ' ', 0)
	sessions := slices.ContainsFunc(reps, func(r engine.SourceReport) bool { return r.Sparkplug != nil })
	feeds := slices.ContainsFunc(reps, func(r engine.SourceReport) bool { return r.Feed != "" })
	fmt.Fprint(tw, "ROUTE\tSOURCE\tEPOCH\tHIGH\tOPEN GAPS")
	if sessions {
		fmt.Fprint(tw, "\tSESSION")
	}
	if feeds {
		fmt.Fprint(tw, "\tLAST FEED")
	}
	fmt.Fprintln(tw)
	for _, r := range reps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s", r.Route, strings.Join(r.Source, "/"), r.Epoch, r.High, gapText(r))
		if sessions {
			fmt.Fprintf(tw, "\t%s", sessionText(r.Sparkplug))
		}
		if feeds {
			fmt.Fprintf(tw, "\t%s", cmp.Or(r.Feed, "-"))
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

func (t *Tool) writeJSON(v any) error {
	enc := json.NewEncoder(t.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
