package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// StoreLoss prints what the shared store lost of the member's commits at
// a failover (`replayguard store loss`), through the running member's API
// when that holds the member's lease, else by opening the store as the
// member (store.member or the run's member id) with its journal, which
// recovers what the journal holds as run would.
//
// A store that cannot be opened (down, or failing over) is when the
// question is asked most: the running member's API answers then from what
// the member knows, if it runs.
func (t *Tool) StoreLoss(ctx context.Context) error {
	a, err := t.openMember(ctx, "loss")
	switch {
	case errors.Is(err, engine.ErrMemberHeld) && t.Config.HTTP.Enabled():
		return t.storeLossRemote(err)
	case err != nil && t.Config.HTTP.Enabled():
		fmt.Fprintf(t.errOut(), "the store cannot be opened (%v); asking the running member, which tells what it knows\n", err)
		if rerr := t.storeLossRemote(err); rerr != nil {
			return err // no member answers either: the store's failure is the one to fix
		}
		return nil
	case err != nil:
		return err
	}
	defer a.Close()
	l := a.Engine.Loss()
	switch st := a.Engine.LossStats(); {
	case l == nil && st.Detected > 0: // found and recovered when the member opened, as run would have
		fmt.Fprintf(t.Out, "member %s: the store had lost commits of this member; %s decided again from its journal (the recovered audit record names them)\n",
			a.Engine.Member(), counted(st.Recovered, "delivery", "deliveries"))
		return nil
	case l == nil:
		fmt.Fprintf(t.Out, "member %s: the store holds every commit this member made\n", a.Engine.Member())
		return nil
	}
	fmt.Fprintln(t.Out, l.Error())
	return nil
}

// AcceptLoss records an operator's acceptance of the lost commits no
// journal holds (`replayguard store accept-loss`), deciding again what the
// journal held; operator is as LocalOperator reads it. It works through
// the running member's API like StoreLoss.
func (t *Tool) AcceptLoss(ctx context.Context, operator string) error {
	if !t.Config.Store.Shared() {
		return errNotShared(t, "accept-loss")
	}
	operator, err := LocalOperator(operator)
	if err != nil {
		return err
	}
	a, err := t.openMember(ctx, "accept-loss")
	if errors.Is(err, engine.ErrMemberHeld) && t.Config.HTTP.Enabled() {
		return t.acceptLossRemote(operator, err)
	}
	if err != nil {
		return err
	}
	defer a.Close()
	got, err := a.Engine.AcceptLoss(ctx, operator)
	if err != nil && !errors.Is(err, engine.ErrRecoveryRetried) {
		return err
	}
	t.printAccepted(got.Member, operator, got.Uncovered.String(), got.Store, err)
	return nil
}

// openMember opens the shared store as the member run writes as, with its
// journal.
func (t *Tool) openMember(ctx context.Context, verb string) (*App, error) {
	if !t.Config.Store.Shared() {
		return nil, errNotShared(t, verb)
	}
	return Open(ctx, t.Config, Options{Logger: t.Log, Member: RunMember(t.Config), Journal: true})
}

func errNotShared(t *Tool, verb string) error {
	return fmt.Errorf("store %s is for a shared store (kind redis or postgres), not kind %s", verb, t.Config.Store.Kind)
}

// printAccepted says what an operator accepted: gone are the positions no
// journal held; recovery, when not nil, why deciding again what the
// journal held failed after the acceptance was recorded.
func (t *Tool) printAccepted(member, operator, gone, store string, recovery error) {
	if recovery != nil {
		fmt.Fprintf(t.Out, "member %s: %s accepted the loss of positions %s on the %s store\n", member, operator, gone, store)
		fmt.Fprintf(t.errOut(), "%v\n", recovery)
		return
	}
	fmt.Fprintf(t.Out, "member %s: %s accepted the loss of positions %s on the %s store; what the journal held was decided again\n",
		member, operator, gone, store)
}

// acceptTimeout bounds a request to the running member: accepting decides
// the journal's batches again.
const acceptTimeout = 10 * time.Minute

// storeLossRemote asks the member's running daemon what it lost.
func (t *Tool) storeLossRemote(held error) error {
	r, err := t.remoteHolding(held, acceptTimeout)
	if err != nil {
		return err
	}
	var out struct {
		Loss *struct {
			Error string `json:"error"`
		} `json:"loss"`
	}
	if err := r.do("GET", "/api/v1/store/loss", nil, &out); err != nil {
		return err
	}
	if out.Loss == nil {
		fmt.Fprintln(t.Out, "the store holds every commit the running member made")
		return nil
	}
	fmt.Fprintln(t.Out, out.Loss.Error)
	return nil
}

// acceptLossRemote has the member's running daemon accept the loss.
func (t *Tool) acceptLossRemote(operator string, held error) error {
	r, err := t.remoteHolding(held, acceptTimeout)
	if err != nil {
		return err
	}
	var out struct {
		Accepted struct {
			Store, Member, Lost, Uncovered string
		} `json:"accepted"`
		Operator string `json:"operator"`
		Recovery string `json:"recovery"`
	}
	if err := r.do("POST", "/api/v1/store/accept-loss", map[string]string{"operator": operator}, &out); err != nil {
		return err
	}
	var recovery error
	if out.Recovery != "" {
		recovery = errors.New(out.Recovery)
	}
	t.printAccepted(out.Accepted.Member, out.Operator, out.Accepted.Uncovered, out.Accepted.Store, recovery)
	return nil
}
