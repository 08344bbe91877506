package app

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// State prints the state of every entity, or of those whose names match
// patterns (engine.EntityMatcher), one line each (asJSON: one JSON
// object), from the store or through the API of the process holding it.
func (t *Tool) State(ctx context.Context, asJSON bool, patterns ...string) error {
	match, err := engine.EntityMatcher(patterns)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		q := url.Values{"entity": patterns}
		var state map[string]map[string]json.RawMessage
		if err := r.do("GET", "/api/v1/state?"+q.Encode(), nil, &state); err != nil {
			return err
		}
		maps.DeleteFunc(state, func(name string, _ map[string]json.RawMessage) bool { return !match(name) }) // a process of a build before entity=
		t.noEntityMatched(patterns, len(state))
		return t.printState(state, asJSON)
	}
	defer a.Close()
	n := 0
	if asJSON {
		n, err = t.streamStateJSON(ctx, a.Store, match)
	} else {
		n, err = t.printStoredState(ctx, a.Store, match)
	}
	if err == nil {
		t.noEntityMatched(patterns, n)
	}
	return err
}

// printStoredState prints the matching entities of store as a table and
// says how many it printed.
func (t *Tool) printStoredState(ctx context.Context, store engine.Store, match func(string) bool) (int, error) {
	tw := t.table()
	n := 0
	err := engine.ScanStoredEntities(ctx, store, func(st engine.EntityState) error {
		if !match(st.Name) {
			return nil
		}
		if n++; n%stateBlock == 0 {
			if err := tw.Flush(); err != nil { // aligns the block so far
				return err
			}
		}
		return printEntity(tw, st.Name, engine.StateJSON([]engine.EntityState{st})[st.Name])
	})
	if err != nil {
		return n, err
	}
	return n, tw.flush()
}

// noEntityMatched says on stderr that patterns took no entity, so that an
// empty answer is not read as a store with nothing in it, nor the other way.
func (t *Tool) noEntityMatched(patterns []string, n int) {
	if n == 0 && len(patterns) > 0 {
		fmt.Fprintf(t.errOut(), "no entity matches %s: `replayguard state` lists every one\n", shownAll(patterns, " "))
	}
}

// stateBlock is how many entities `state` aligns at a time: a fleet's
// are printed as they are read, not held.
const stateBlock = 4096

// table is a tabwriter onto t.Out through a buffer, whose flush writes
// both: a fleet's lines are not a write each.
type table struct {
	*tabwriter.Writer
	out *bufio.Writer
}

func (t *Tool) table() table {
	out := bufio.NewWriter(t.Out)
	return table{tabwriter.NewWriter(out, 0, 4, 2, ' ', 0), out}
}

func (tw table) flush() error {
	if err := tw.Flush(); err != nil {
		return err
	}
	return tw.out.Flush()
}

// streamStateJSON prints every entity of store as one JSON object, as
// writeJSON prints a map of them, reading one at a time.
func (t *Tool) streamStateJSON(ctx context.Context, store engine.Store, match func(string) bool) (int, error) {
	w := bufio.NewWriter(t.Out)
	sep := "{\n"
	n := 0
	err := engine.ScanStoredEntities(ctx, store, func(st engine.EntityState) error {
		if !match(st.Name) {
			return nil
		}
		name, err := json.Marshal(st.Name)
		if err != nil {
			return err
		}
		fields, err := json.MarshalIndent(engine.StateJSON([]engine.EntityState{st})[st.Name], "  ", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s  %s: %s", sep, name, fields) // a closed pipe ends the read
		sep = ",\n"
		n++
		return err
	})
	if err != nil {
		return n, err
	}
	if sep == "{\n" {
		w.WriteString("{}\n")
	} else {
		w.WriteString("\n}\n")
	}
	return n, w.Flush()
}

// printEntity prints one entity's line of `state`: its name and its
// fields, sorted.
func printEntity(w io.Writer, name string, state map[string]json.RawMessage) error {
	fields := make([]string, 0, len(state))
	for k, v := range state {
		fields = append(fields, shown(k)+"="+shownJSON(v))
	}
	sort.Strings(fields)
	_, err := fmt.Fprintf(w, "%s\t%s\n", shown(name), strings.Join(fields, " "))
	return err
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
	tw := t.table()
	for _, n := range names {
		if err := printEntity(tw, n, state[n]); err != nil {
			return err
		}
	}
	return tw.flush()
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
	reps, err := engine.StoredSources(ctx, a.Store)
	if err != nil {
		return err
	}
	return t.printSources(reps, asJSON)
}

func (t *Tool) printSources(reps []engine.SourceReport, asJSON bool) error {
	if asJSON {
		return t.writeJSON(reps)
	}
	if len(reps) == 0 {
		fmt.Fprintln(t.errOut(), "no source windows: a route keeps one for each source only when it has a sequence (or is a sparkplug route); "+
			"an id route's messages are decided by the key window alone, and replayguard state shows what they changed")
	}
	tw := t.table()
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s", r.Route, shownAll(r.Source, "/"), shown(r.Epoch), r.High, gapText(r))
		if sessions {
			fmt.Fprintf(tw, "\t%s", sessionText(r.Sparkplug))
		}
		if feeds {
			fmt.Fprintf(tw, "\t%s", cmp.Or(r.Feed, "-"))
		}
		fmt.Fprintln(tw)
	}
	return tw.flush()
}

// sessionText describes a Sparkplug edge's session: online or offline,
// its bdSeq as the edge sends it (with the unwrapped count the epochs
// carry, once it has passed 255) and when its last birth was applied.
func sessionText(s *engine.SparkplugReport) string {
	if s == nil {
		return "-"
	}
	state := "offline"
	if s.Online {
		state = "online"
	}
	bdSeq := strconv.FormatInt(s.BdSeq, 10)
	if s.BdSeqUnwrapped != s.BdSeq {
		bdSeq += " (unwrapped " + strconv.FormatInt(s.BdSeqUnwrapped, 10) + ")"
	}
	return fmt.Sprintf("%s bdSeq %s, birth %s", state, bdSeq, s.LastBirth.Format(time.RFC3339))
}

func gapText(r engine.SourceReport) string {
	var parts []string
	for _, g := range r.Gaps {
		parts = append(parts, rangeText(g))
	}
	for _, o := range r.Older {
		for _, g := range o.Gaps {
			parts = append(parts, "epoch "+shown(o.Epoch)+": "+rangeText(g))
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
