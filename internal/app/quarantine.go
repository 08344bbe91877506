package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/web"
)

// QuarantineList writes the held messages, one JSON object a line, from
// the store or through the API of the process holding it.
func (t *Tool) QuarantineList(ctx context.Context) error {
	enc := json.NewEncoder(t.Out)
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		return r.quarantine(func(it web.QuarantineItem) error { return enc.Encode(it) })
	}
	defer a.Close()
	return a.Store.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error {
		return enc.Encode(web.NewQuarantineItem(q))
	})
}

// QuarantineResolve releases (decides again) or discards quarantined
// message rs.ID, on the local store or through the running daemon's API,
// and prints the decision and its audit position.
func (t *Tool) QuarantineResolve(ctx context.Context, rs Resolve) error {
	// A reason of white space says nothing, as the API holds too: it is
	// trimmed, and a blank one refused.
	rs.Reason = strings.TrimSpace(rs.Reason)
	if rs.Action == "discard" && rs.Reason == "" {
		return fmt.Errorf("%w: discard needs --reason TEXT", ErrUsage)
	}
	if err := checkReason(rs.Reason); err != nil {
		return err
	}
	var d engine.Decision
	chain := "" // whose chain holds the record, on a shared store
	a, err := t.open(ctx, "quarantine")
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		operator, oerr := r.operator(rs.Operator)
		if oerr != nil {
			return oerr
		}
		d, err = r.resolve(rs.Action, rs.ID, rs.Reason, operator)
	} else {
		defer a.Close()
		chain = ofMember(a.Engine.Member())
		d, err = resolveQuarantine(ctx, a.Engine, rs)
	}
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("no quarantined message #%d", rs.ID)
	}
	if err != nil {
		return err
	}
	switch {
	case rs.Action == "release" && d.Held != 0:
		fmt.Fprintf(t.Out, "#%d released, and held again as #%d, %s: %s (audit position %d%s)\n", rs.ID, d.Held, d.Outcome, d.Reason, d.Position, chain)
	case rs.Action == "release":
		fmt.Fprintf(t.Out, "#%d released: %s (audit position %d%s)\n", rs.ID, d.Outcome, d.Position, chain)
	default:
		fmt.Fprintf(t.Out, "#%d discarded (audit position %d%s)\n", rs.ID, d.Position, chain)
	}
	return nil
}

// resolveQuarantine decides on the local engine, as LocalOperator names
// the operator.
func resolveQuarantine(ctx context.Context, e *engine.Engine, rs Resolve) (engine.Decision, error) {
	operator, err := LocalOperator(rs.Operator)
	if err != nil {
		return engine.Decision{}, err
	}
	if rs.Action == "release" {
		return e.Release(ctx, rs.ID, operator)
	}
	return e.Discard(ctx, rs.ID, rs.Reason, operator)
}
