package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/web"
)

func outboxFlags(fs *flag.FlagSet) {
	fs.String("member", "", "retry, drop on a shared store: whose outbox holds the entry (default the one member whose held entries have ID)")
	fs.String("reason", "", "drop: why (required); retry: a note for the audit (optional)")
	fs.String("operator", "", "retry, drop on a local store: who decides, for the audit (default the OS user); "+
		"through a running daemon's API the token names the operator")
	fs.String("token-name", "", "through a running daemon's API: the http.tokens entry whose token to send (default $"+EnvToken+")")
}

func cmdOutbox(e *env) error {
	if len(e.args) == 0 {
		return fmt.Errorf("%w: outbox takes list, retry ID or drop ID", errUsage)
	}
	switch e.args[0] {
	case "list":
		if len(e.args) != 1 {
			return fmt.Errorf("%w: outbox list takes no argument", errUsage)
		}
		return outboxList(e)
	case "retry", "drop":
		if len(e.args) != 2 {
			return fmt.Errorf("%w: outbox %s takes one ID", errUsage, e.args[0])
		}
		id, err := strconv.ParseUint(e.args[1], 10, 64)
		if err != nil || id == 0 {
			return fmt.Errorf("%w: %q is not an outbox entry id", errUsage, e.args[1])
		}
		return resolveForward(e, e.args[0], id)
	default:
		return fmt.Errorf("%w: unknown outbox action %q", errUsage, e.args[0])
	}
}

// outboxList prints the held entries, one JSON a line, and on stderr the
// pending ones of each member that has some, and the totals.
func outboxList(e *env) error {
	enc := json.NewEncoder(e.stdout)
	var pending []engine.OutboxDepth
	held := 0
	a, err := openRead(e)
	if err != nil {
		r, rerr := e.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		if pending, err = r.outbox(func(it web.HeldItem) error { held++; return enc.Encode(it) }); err != nil {
			return err
		}
	} else {
		defer a.Close()
		rep, err := engine.ReadOutbox(e.ctx, a.Store)
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
		if p.Member != "" && p.Pending > 0 {
			fmt.Fprintf(e.stderr, "outbox of member %s: %d pending\n", p.Member, p.Pending)
		}
	}
	fmt.Fprintf(e.stderr, "outbox: %d pending, %d held for an operator\n", total, held)
	return nil
}

// resolveForward retries or drops a held entry, on the local store or
// through the running daemon's API.
func resolveForward(e *env, action string, id uint64) error {
	reason, member := e.flagString("reason"), e.flagString("member")
	if action == "drop" && reason == "" {
		return fmt.Errorf("%w: drop needs --reason TEXT", errUsage)
	}
	var res forwardResult
	a, err := app.Open(e.ctx, e.cfg, app.Options{Logger: e.log, Member: app.MemberFor("outbox")})
	if err != nil {
		r, rerr := e.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		if e.flagString("operator") != "" {
			return fmt.Errorf("%w: --operator is for a local store: the running daemon names the operator "+
				"from the API token (choose it with --token-name or $%s)", errUsage, EnvToken)
		}
		res, err = r.resolveForward(action, member, id, reason)
	} else {
		defer a.Close()
		operator, oerr := localOperator(e.flagString("operator"))
		if oerr != nil {
			return oerr
		}
		var fr engine.ForwardResolution
		if action == "retry" {
			fr, err = a.Engine.RetryForward(e.ctx, member, id, reason, operator)
		} else {
			fr, err = a.Engine.DropForward(e.ctx, member, id, reason, operator)
		}
		res = forwardResult{Member: fr.Entry.Member, Output: fr.Entry.Output, Target: fr.Entry.Target,
			Position: fr.Record.Position, Chain: fr.Record.Member}
	}
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return fmt.Errorf("no held outbox entry %d%s (outbox list shows them)", id, ofMember(member))
	case errors.Is(err, engine.ErrAmbiguous):
		return fmt.Errorf("%w: %v; give --member", errUsage, err)
	case err != nil:
		return err
	}
	where, chain := ofMember(res.Member), ofMember(res.Chain)
	if action == "retry" {
		fmt.Fprintf(e.stdout, "outbox entry %d%s (%s %s) is pending again: the drainer delivers it (audit position %d%s)\n",
			id, where, res.Output, res.Target, res.Position, chain)
	} else {
		fmt.Fprintf(e.stdout, "outbox entry %d%s (%s %s) dropped (audit position %d%s)\n",
			id, where, res.Output, res.Target, res.Position, chain)
	}
	return nil
}

func ofMember(m string) string {
	if m == "" {
		return ""
	}
	return " of member " + m
}

// forwardResult is what a retry or drop says, locally or through the API.
type forwardResult struct {
	Member   string `json:"member"`
	Output   string `json:"output"`
	Target   string `json:"target"`
	Position uint64 `json:"position"`
	Chain    string `json:"chain"`
}

// outbox walks GET /api/v1/outbox and returns the pending depths.
func (r *remote) outbox(fn func(web.HeldItem) error) ([]engine.OutboxDepth, error) {
	path := "/api/v1/outbox?limit=1000"
	for {
		var page web.OutboxPage
		if err := r.do("GET", path, nil, &page); err != nil {
			return nil, err
		}
		for _, it := range page.Held {
			if err := fn(it); err != nil {
				return nil, err
			}
		}
		if page.Next == nil {
			return page.Pending, nil
		}
		path = fmt.Sprintf("/api/v1/outbox?limit=1000&member=%s&from=%d", url.QueryEscape(page.Next.Member), page.Next.ID)
	}
}

// resolveForward retries or drops through the API.
func (r *remote) resolveForward(action, member string, id uint64, reason string) (forwardResult, error) {
	var res forwardResult
	body := map[string]string{}
	if member != "" {
		body["member"] = member
	}
	if reason != "" {
		body["reason"] = reason
	}
	err := r.do("POST", fmt.Sprintf("/api/v1/outbox/%d/%s", id, action), body, &res)
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.status == http.StatusNotFound:
		return res, engine.ErrNotFound
	case errors.As(err, &ae) && ae.status == http.StatusConflict:
		return res, apiSaid{ae.msg, engine.ErrAmbiguous}
	}
	return res, err
}

// apiSaid is the API's message of an error the engine returns as err.
type apiSaid struct {
	msg string
	err error
}

func (a apiSaid) Error() string { return a.msg }
func (a apiSaid) Unwrap() error { return a.err }
