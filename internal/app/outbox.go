package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/web"
)

// OutboxList writes the outbox entries a downstream refused and that are
// held for an operator, one JSON object a line, and to Err the pending
// entries of each member that has some, and the totals.
func (t *Tool) OutboxList(ctx context.Context) error {
	enc := json.NewEncoder(t.Out)
	var pending []engine.OutboxDepth
	held := 0
	a, err := t.openRead(ctx)
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		if pending, err = r.outbox(func(it web.HeldItem) error { held++; return enc.Encode(it) }); err != nil {
			return err
		}
	} else {
		defer a.Close()
		rep, err := engine.ReadOutbox(ctx, a.Store)
		if err != nil {
			return err
		}
		for _, h := range rep.Held {
			if err := enc.Encode(web.NewHeldItem(h)); err != nil {
				return err
			}
		}
		pending, held = rep.Pending, len(rep.Held)
	}
	total := 0
	for _, p := range pending {
		total += p.Pending
		// The oldest entry is the one a stalled output may wait at, named
		// for `outbox hold` when its downstream refuses it alone, for ever.
		oldest := ""
		if o := p.Oldest; o != nil {
			oldest = fmt.Sprintf("oldest pending entry %d (%s %s), decided %s ago", o.ID, o.Output, o.Target, time.Since(o.Time).Round(time.Second))
		}
		switch {
		case p.Member != "" && p.Pending > 0 && oldest != "":
			fmt.Fprintf(t.errOut(), "outbox of member %s: %d pending, %s\n", p.Member, p.Pending, oldest)
		case p.Member != "" && p.Pending > 0:
			fmt.Fprintf(t.errOut(), "outbox of member %s: %d pending\n", p.Member, p.Pending)
		case oldest != "":
			fmt.Fprintf(t.errOut(), "outbox: %s\n", oldest)
		}
	}
	fmt.Fprintf(t.errOut(), "outbox: %d pending, %d held for an operator\n", total, held)
	return nil
}

// forwardResult is what a retry or drop says, locally or through the API.
type forwardResult struct {
	Member   string `json:"member"`
	Output   string `json:"output"`
	Target   string `json:"target"`
	Position uint64 `json:"position"`
	Chain    string `json:"chain"`
}

// OutboxResolve retries or drops the held outbox entries ids in turn, or
// holds pending ones (rs.Action "hold": entries a downstream keeps
// failing, which every entry behind them waits for), on the local store or
// through the running daemon's API, and prints each; an entry not held (not
// pending, for a hold) is reported and the rest go on (see resolveEach).
func (t *Tool) OutboxResolve(ctx context.Context, rs Resolve, ids ...uint64) error {
	// A reason of white space says nothing, as the API holds too: it is
	// trimmed, and a blank one refused.
	rs.Reason = strings.TrimSpace(rs.Reason)
	if rs.Action != "retry" && rs.Reason == "" {
		return fmt.Errorf("%w: %s needs --reason TEXT", ErrUsage, rs.Action)
	}
	if err := checkReason(rs.Reason); err != nil {
		return err
	}
	// A hold's entry is pending in the outbox of a member that decides:
	// without --member, that of the member run writes as (store.member,
	// else what RunMember names), never the command's own, which keeps none.
	if sc := t.Config.Store; rs.Action == "hold" && rs.Member == "" && sc.Shared() && sc.Member == "" {
		rs.Member = RunMember(t.Config)
	}
	var resolve func(id uint64) (forwardResult, error)
	a, err := t.open(ctx, "outbox")
	if err != nil {
		r, rerr := t.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		operator, oerr := r.operator(rs.Operator)
		if oerr != nil {
			return oerr
		}
		resolve = func(id uint64) (forwardResult, error) {
			return r.resolveForward(rs.Action, rs.Member, id, rs.Reason, operator)
		}
	} else {
		defer a.Close()
		resolve = func(id uint64) (forwardResult, error) {
			rs := rs
			rs.ID = id
			return resolveForward(ctx, a.Engine, rs)
		}
	}
	return t.resolveEach(ids, map[string]string{"retry": "retried", "drop": "dropped", "hold": "held"}[rs.Action], func(id uint64) (bool, error) {
		res, err := resolve(id)
		switch {
		case errors.Is(err, engine.ErrNotFound) && rs.Action == "hold":
			return true, fmt.Errorf("no pending outbox entry %d%s (delivered, held already, or never was: readiness names the entry an output is stuck at)", id, ofMember(rs.Member))
		case errors.Is(err, engine.ErrNotFound):
			return true, fmt.Errorf("no held outbox entry %d%s (outbox list shows them)", id, ofMember(rs.Member))
		case errors.Is(err, engine.ErrAmbiguous):
			return false, fmt.Errorf("%w: %v; give --member", ErrUsage, err)
		case err != nil:
			return false, err
		}
		where, chain := ofMember(res.Member), ofMember(res.Chain)
		switch rs.Action {
		case "retry":
			fmt.Fprintf(t.Out, "outbox entry %d%s (%s %s) is pending again: the drainer delivers it (audit position %d%s)\n",
				id, where, res.Output, res.Target, res.Position, chain)
		case "hold":
			fmt.Fprintf(t.Out, "outbox entry %d%s (%s %s) is held: the entries behind it go on; retry or drop it once resolved (audit position %d%s)\n",
				id, where, res.Output, res.Target, res.Position, chain)
		default:
			fmt.Fprintf(t.Out, "outbox entry %d%s (%s %s) dropped (audit position %d%s)\n",
				id, where, res.Output, res.Target, res.Position, chain)
		}
		return false, nil
	})
}

// resolveForward decides on the local engine, as LocalOperator names the
// operator.
func resolveForward(ctx context.Context, e *engine.Engine, rs Resolve) (forwardResult, error) {
	operator, err := LocalOperator(rs.Operator)
	if err != nil {
		return forwardResult{}, err
	}
	var fr engine.ForwardResolution
	switch rs.Action {
	case "retry":
		fr, err = e.RetryForward(ctx, rs.Member, rs.ID, rs.Reason, operator)
	case "hold":
		fr, err = e.HoldPending(ctx, rs.Member, rs.ID, rs.Reason, operator)
	default:
		fr, err = e.DropForward(ctx, rs.Member, rs.ID, rs.Reason, operator)
	}
	return forwardResult{Member: fr.Entry.Member, Output: fr.Entry.Output, Target: fr.Entry.Target,
		Position: fr.Record.Position, Chain: fr.Record.Member}, err
}
