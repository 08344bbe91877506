package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
)

func storeFlags(fs *flag.FlagSet) {
	fs.String("operator", "", "accept-loss: who accepts the loss, for the audit (default the OS user; through a running daemon's API with tokens, the token names the operator)")
	fs.String("token-name", "", "through a running daemon's API: the http.tokens entry whose token to send (default $"+EnvToken+")")
}

// cmdStore is `replayguard store loss|accept-loss`: what a member found
// missing from its shared store, and an operator's acceptance of what no
// journal holds. It works through the running member's API when that holds
// the member's lease, else opens the store as the member (store.member or
// mqtt.client_id) with its journal.
func cmdStore(e *env) error {
	if len(e.args) != 1 || (e.args[0] != "loss" && e.args[0] != "accept-loss") {
		return fmt.Errorf("%w: store takes loss or accept-loss", errUsage)
	}
	if !e.cfg.Store.Shared() {
		return fmt.Errorf("store %s is for a shared store (kind redis or postgres), not kind %s", e.args[0], e.cfg.Store.Kind)
	}
	operator := ""
	if e.args[0] == "accept-loss" {
		var err error
		if operator, err = localOperator(e.flagString("operator")); err != nil {
			return err
		}
	}
	a, err := app.Open(e.ctx, e.cfg, app.Options{Logger: e.log, Member: app.RunMember(e.cfg), Journal: true})
	if errors.Is(err, engine.ErrMemberHeld) && e.cfg.HTTP.Enabled() {
		return storeRemote(e, operator, err)
	}
	if err != nil {
		return err
	}
	defer a.Close()
	l := a.Engine.Loss()
	if e.args[0] == "loss" {
		switch st := a.Engine.LossStats(); {
		case l == nil && st.Detected > 0: // found and recovered when the member opened, as run would have
			fmt.Fprintf(e.stdout, "member %s: the store had lost commits of this member; %d deliveries decided again from its journal (the recovered audit record names them)\n",
				a.Engine.Member(), st.Recovered)
			return nil
		case l == nil:
			fmt.Fprintf(e.stdout, "member %s: the store holds every commit this member made\n", a.Engine.Member())
			return nil
		}
		fmt.Fprintln(e.stdout, l.Error())
		return nil
	}
	got, err := a.Engine.AcceptLoss(e.ctx, operator)
	if err != nil {
		return err
	}
	printAccepted(e, got.Member, operator, got.Uncovered.String(), got.Store)
	return nil
}

// printAccepted says what an operator accepted: gone are the positions no
// journal held.
func printAccepted(e *env, member, operator, gone, store string) {
	fmt.Fprintf(e.stdout, "member %s: %s accepted the loss of positions %s on the %s store; what the journal held was decided again\n",
		member, operator, gone, store)
}

// storeRemote asks the member's running daemon.
func storeRemote(e *env, operator string, held error) error {
	r, err := e.remoteHolding(held, 10*time.Minute) // accepting decides the journal's batches again
	if err != nil {
		return err
	}
	if e.args[0] == "loss" {
		var out struct {
			Loss *struct {
				Error string `json:"error"`
			} `json:"loss"`
		}
		if err := r.do("GET", "/api/v1/store/loss", nil, &out); err != nil {
			return err
		}
		if out.Loss == nil {
			fmt.Fprintln(e.stdout, "the store holds every commit the running member made")
			return nil
		}
		fmt.Fprintln(e.stdout, out.Loss.Error)
		return nil
	}
	var out struct {
		Accepted struct {
			Store, Member, Lost, Uncovered string
		} `json:"accepted"`
		Operator string `json:"operator"`
	}
	if err := r.do("POST", "/api/v1/store/accept-loss", map[string]string{"operator": operator}, &out); err != nil {
		return err
	}
	printAccepted(e, out.Accepted.Member, out.Operator, out.Accepted.Uncovered, out.Accepted.Store)
	return nil
}
