package main

import (
	"flag"
	"fmt"

	"github.com/replayguard/replayguard/internal/app"
)

func outboxFlags(fs *flag.FlagSet) {
	fs.String("member", "", "retry, drop, hold on a shared store: whose outbox holds the entry (default for retry and drop the one member whose held entries have ID, for hold the member run writes as: store.member, else mqtt.client_id)")
	fs.String("reason", "", "drop, hold: why (required); retry: a note for the audit (optional)")
	fs.String("operator", "", "retry, drop, hold on a local store: who decides, for the audit (default the OS user); "+
		"through a running daemon's API the token names the operator")
	tokenNameFlag(fs)
}

func cmdOutbox(e *env) error {
	if len(e.args) == 0 {
		return fmt.Errorf("%w: outbox takes list, retry ID..., drop ID... or hold ID...", errUsage)
	}
	switch e.args[0] {
	case "list":
		if len(e.args) != 1 {
			return fmt.Errorf("%w: outbox list takes no argument", errUsage)
		}
		if err := e.actionFlags("outbox list"); err != nil {
			return err
		}
		return e.tool().OutboxList(e.ctx)
	case "retry", "drop", "hold":
		ids, err := entryIDs(e.args, "an outbox entry id")
		if err != nil {
			return err
		}
		if err := e.actionFlags("outbox "+e.args[0], "member", "reason", "operator"); err != nil {
			return err
		}
		return e.tool().OutboxResolve(e.ctx, app.Resolve{Action: e.args[0], Reason: e.flagString("reason"),
			Operator: e.flagString("operator"), Member: e.flagString("member")}, ids...)
	default:
		return fmt.Errorf("%w: unknown outbox action %q", errUsage, e.args[0])
	}
}
