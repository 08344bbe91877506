package main

import (
	"flag"
	"fmt"
)

func storeFlags(fs *flag.FlagSet) {
	fs.String("operator", "", "accept-loss: who accepts the loss, for the audit (default the OS user; through a running daemon's API with tokens, the token names the operator)")
	tokenNameFlag(fs)
}

// cmdStore is `replayguard store loss|accept-loss`: what a member found
// missing from its shared store, and an operator's acceptance of what no
// journal holds. It works through the running member's API when that holds
// the member's lease, else opens the store as the member (store.member or
// mqtt.client_id) with its journal.
func cmdStore(e *env) error {
	if len(e.args) == 0 || (e.args[0] != "loss" && e.args[0] != "accept-loss") {
		return fmt.Errorf("%w: store takes loss or accept-loss", errUsage)
	}
	if len(e.args) > 1 {
		return fmt.Errorf("%w: store %s takes no arguments, got %q", errUsage, e.args[0], e.args[1:])
	}
	if e.args[0] == "loss" {
		if err := e.actionFlags("store loss"); err != nil {
			return err
		}
		return e.tool().StoreLoss(e.ctx)
	}
	return e.tool().AcceptLoss(e.ctx, e.flagString("operator"))
}
