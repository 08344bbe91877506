package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/replayguard/replayguard/internal/app"
)

func quarantineFlags(fs *flag.FlagSet) {
	fs.String("reason", "", "discard: why (required)")
	fs.String("operator", "", "release, discard on a local store: who decides, for the audit (default the OS user); "+
		"through a running daemon's API the token names the operator")
	tokenNameFlag(fs)
}

func cmdQuarantine(e *env) error {
	if len(e.args) == 0 {
		return fmt.Errorf("%w: quarantine takes list, release ID... or discard ID...", errUsage)
	}
	switch e.args[0] {
	case "list":
		if len(e.args) != 1 {
			return fmt.Errorf("%w: quarantine list takes no argument", errUsage)
		}
		if err := e.actionFlags("quarantine list"); err != nil {
			return err
		}
		return e.tool().QuarantineList(e.ctx)
	case "release", "discard":
		ids, err := entryIDs(e.args, "a quarantine id")
		if err != nil {
			return err
		}
		takes := []string{"operator"}
		if e.args[0] == "discard" {
			takes = append(takes, "reason")
		}
		if err := e.actionFlags("quarantine "+e.args[0], takes...); err != nil {
			return err
		}
		return e.tool().QuarantineResolve(e.ctx, app.Resolve{Action: e.args[0],
			Reason: e.flagString("reason"), Operator: e.flagString("operator")}, ids...)
	default:
		return fmt.Errorf("%w: unknown quarantine action %q", errUsage, e.args[0])
	}
}

// entryIDs reads the ids after args' action: one or more, each what
// names (a quarantine id, an outbox entry id).
func entryIDs(args []string, what string) ([]uint64, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("%w: %s takes one ID or more", errUsage, args[0])
	}
	var ids []uint64
	for _, a := range args[1:] {
		id, err := strconv.ParseUint(a, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%w: %q is not %s", errUsage, a, what)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
