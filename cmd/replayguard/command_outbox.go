package main

import (
	"flag"
	"fmt"

	"github.com/replayguard/replayguard/internal/app"
)

func outboxFlags(fs *flag.FlagSet) {
	fs.String("member", "", "retry, drop on a shared store: whose outbox holds the entry (default the one member whose held entries have ID)")
	fs.String("reason", "", "drop: why (required); retry: a note for the audit (optional)")
	fs.String("operator", "", "retry, drop on a local store: who decides, for the audit (default the OS user); "+
		"through a running daemon's API the token names the operator")
	tokenNameFlag(fs)
}

func cmdOutbox(e *env) error {
	if len(e.args) == 0 {
		return fmt.Errorf("%w: outbox takes list, retry ID... or drop ID...", errUsage)
	}
	switch e.args[0] {
	case "list":
		if len(e.args) != 1 {
			return fmt.Errorf("%w: outbox list takes no argument", errUsage)
		}
		return e.tool().OutboxList(e.ctx)
	case "retry", "drop":
		ids, err := entryIDs(e.args, "an outbox entry id")
		if err != nil {
			return err
		}
		return e.tool().OutboxResolve(e.ctx, app.Resolve{Action: e.args[0], Reason: e.flagString("reason"),
			Operator: e.flagString("operator"), Member: e.flagString("member")}, ids...)
	default:
		return fmt.Errorf("%w: unknown outbox action %q", errUsage, e.args[0])
	}
}
