package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// QuarantineResolve releases (decides again) or discards the quarantined
// messages ids in turn, on the local store or through the running
// daemon's API, and prints each decision and its audit position. An entry
// it cannot resolve (not held, still malformed, resolved by another at
// the same moment) is reported and the rest go on; the error then counts
// them. Any other failure stops it: the entries before were resolved.
func (t *Tool) QuarantineResolve(ctx context.Context, rs Resolve, ids ...uint64) error {
	// A reason of white space says nothing, as the API holds too: it is
	// trimmed, and a blank one refused.
	rs.Reason = strings.TrimSpace(rs.Reason)
	if rs.Action == "discard" && rs.Reason == "" {
		return fmt.Errorf("%w: discard needs --reason TEXT", ErrUsage)
	}
	if err := checkReason(rs.Reason); err != nil {
		return err
	}
	var resolve func(id uint64) (engine.Decision, error)
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
		resolve = func(id uint64) (engine.Decision, error) { return r.resolve(rs.Action, id, rs.Reason, operator) }
	} else {
		defer a.Close()
		chain = ofMember(a.Engine.Member())
		resolve = func(id uint64) (engine.Decision, error) {
			rs := rs
			rs.ID = id
			return resolveQuarantine(ctx, a.Engine, rs)
		}
	}
	return t.resolveEach(ids, map[string]string{"release": "released", "discard": "discarded"}[rs.Action], func(id uint64) (bool, error) {
		d, err := resolve(id)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			return true, fmt.Errorf("no quarantined message #%d", id)
		case err != nil:
			return entryRefused(err), fmt.Errorf("#%d: %w", id, err)
		case rs.Action == "release" && d.Held != 0:
			fmt.Fprintf(t.Out, "#%d released, and held again as #%d, %s: %s (audit position %d%s)\n", id, d.Held, d.Outcome, d.Reason, d.Position, chain)
		case rs.Action == "release":
			fmt.Fprintf(t.Out, "#%d released: %s (audit position %d%s)\n", id, d.Outcome, d.Position, chain)
		default:
			fmt.Fprintf(t.Out, "#%d discarded (audit position %d%s)\n", id, d.Position, chain)
		}
		return false, nil
	})
}

// resolveEach resolves the entries ids in turn (resolve prints each
// result). An error that is one entry's (resolve says so: not held, still
// malformed) is printed and the rest go on, the error returned at the end
// counting them; any other stops there. With one id its error is the
// command's.
func (t *Tool) resolveEach(ids []uint64, done string, resolve func(id uint64) (ofEntry bool, err error)) error {
	unresolved := 0
	for _, id := range ids {
		ofEntry, err := resolve(id)
		switch {
		case err == nil:
		case len(ids) == 1:
			return err
		case ofEntry:
			fmt.Fprintln(t.Err, err)
			unresolved++
		default:
			return fmt.Errorf("%w (it and the entries after it are not %s)", err, done)
		}
	}
	if unresolved > 0 {
		return fmt.Errorf("%d of %s not %s (above)", unresolved, counted(len(ids), "entry", "entries"), done)
	}
	return nil
}

// entryRefused reports an error about one entry that leaves the others
// to resolve: still malformed, or being resolved by another (409 through
// the API, where an entry not held is 404, resolve's ErrNotFound).
func entryRefused(err error) bool {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status == http.StatusConflict
	}
	return errors.Is(err, engine.ErrStillMalformed) || errors.Is(err, engine.ErrInProgress)
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
