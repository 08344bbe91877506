package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
)

// ForgetSink is `replayguard audit forget-sink NAME --reason TEXT`: an
// operator's word that the audit sink named sink is gone for good. Its
// stored cursors (on a shared store, one per member's chain) hold audit
// retention back until then, since a record leaves the store only once
// every sink with a cursor delivered it. It writes an audit record naming
// the sink, its cursors, the operator (as LocalOperator reads it) and the
// reason, then drops the cursors. A sink this configuration names is
// refused: it would deliver again from what the store still holds.
func (t *Tool) ForgetSink(ctx context.Context, sink, reason, operator string) error {
	reason = strings.TrimSpace(reason)
	switch {
	case sink == "":
		return fmt.Errorf("%w: forget-sink takes the sink's name", ErrUsage)
	case reason == "":
		return fmt.Errorf("%w: forget-sink needs --reason TEXT", ErrUsage)
	case slices.ContainsFunc(t.Config.Audit.Sinks, func(s config.SinkConfig) bool { return s.Name == sink }):
		// The command line is right; the configuration still streams to it.
		return fmt.Errorf("audit.sinks names %q: remove it from the configuration of every member first", sink)
	}
	if err := checkReason(reason); err != nil {
		return err
	}
	operator, err := LocalOperator(operator)
	if err != nil {
		return err
	}
	a, err := t.open(ctx, "audit")
	if errors.Is(err, engine.ErrLocked) {
		return fmt.Errorf("%w: forget-sink opens the store itself, never through a running instance's API: stop the instance that holds it, then forget the sink", err)
	}
	if err != nil {
		return err
	}
	defer a.Close()
	cursors, err := sinkCursors(ctx, a.Store, sink)
	if err != nil {
		return err
	}
	if len(cursors) == 0 {
		return fmt.Errorf("%w: %q", ErrNoSinkCursor, sink)
	}
	held := cursorList(cursors)
	r, err := a.Engine.RecordSinkForgotten(ctx, fmt.Sprintf("audit sink %s forgotten, its cursors dropped (%s): %s", sink, held, reason), operator)
	if err != nil {
		return fmt.Errorf("audit: record forgetting sink %s: %w", sink, err)
	}
	if err := dropSinkCursors(ctx, a.Store, sink); err != nil {
		return fmt.Errorf("audit: sink %s: the audit record is written (position %d%s) but its cursors stay: %w; run forget-sink again",
			sink, r.Position, ofMember(r.Member), err)
	}
	fmt.Fprintf(t.Out, "audit sink %s forgotten by %s: its cursors (%s) no longer hold retention back (audit position %d%s)\n",
		sink, operator, held, r.Position, ofMember(r.Member))
	return nil
}

// sinkCursors returns sink's stored cursors: by member's chain on a shared
// store, under "" on a single-owner one.
func sinkCursors(ctx context.Context, st Store, sink string) (map[string]uint64, error) {
	out := map[string]uint64{}
	if g, ok := groupOf(st); ok {
		chains, err := g.Chains(ctx)
		if err != nil {
			return nil, fmt.Errorf("audit: read the members' chains: %w", err)
		}
		for _, ch := range chains {
			cs, err := g.ChainCursors(ctx, ch.Member)
			if err != nil {
				return nil, fmt.Errorf("audit: read the sinks' cursors on member %s's chain: %w", ch.Member, err)
			}
			if pos, ok := cs[sink]; ok {
				out[ch.Member] = pos
			}
		}
		return out, nil
	}
	cs := st.Capabilities().Cursors
	if cs == nil {
		return nil, fmt.Errorf("audit: the store keeps no audit sink cursors")
	}
	all, err := cs.Cursors(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: read the sinks' cursors: %w", err)
	}
	if pos, ok := all[sink]; ok {
		out[""] = pos
	}
	return out, nil
}

// dropSinkCursors drops what sinkCursors found.
func dropSinkCursors(ctx context.Context, st Store, sink string) error {
	if g, ok := groupOf(st); ok {
		_, err := g.ForgetSink(ctx, sink)
		return err
	}
	_, err := st.Capabilities().Cursors.ForgetCursor(ctx, sink)
	return err
}

// cursorList says each cursor: "at 100" on a single-owner store, "member
// a at 100, member b at 7" on a shared one.
func cursorList(cursors map[string]uint64) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(cursors)) {
		if m == "" {
			parts = append(parts, fmt.Sprintf("at %d", cursors[m]))
			continue
		}
		parts = append(parts, fmt.Sprintf("member %s's chain at %d", m, cursors[m]))
	}
	return strings.Join(parts, ", ")
}
