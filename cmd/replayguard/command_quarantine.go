package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/web"
)

func quarantineFlags(fs *flag.FlagSet) {
	fs.String("reason", "", "discard: why (required)")
	fs.String("operator", "", "release, discard on a local store: who decides, for the audit (default the OS user); "+
		"through a running daemon's API the token names the operator")
	fs.String("token-name", "", "through a running daemon's API: the http.tokens entry whose token to send (default $"+EnvToken+")")
}

func cmdQuarantine(e *env) error {
	if len(e.args) == 0 {
		return fmt.Errorf("%w: quarantine takes list, release ID or discard ID", errUsage)
	}
	switch e.args[0] {
	case "list":
		enc := json.NewEncoder(e.stdout)
		a, err := openRead(e)
		if err != nil {
			r, rerr := e.remoteFor(err)
			if rerr != nil {
				return rerr
			}
			return r.quarantine(func(it web.QuarantineItem) error { return enc.Encode(it) })
		}
		defer a.Close()
		return a.Store.ScanQuarantine(e.ctx, func(q engine.QuarantineEntry) error {
			return enc.Encode(web.NewQuarantineItem(q))
		})
	case "release", "discard":
		if len(e.args) != 2 {
			return fmt.Errorf("%w: quarantine %s takes one ID", errUsage, e.args[0])
		}
		id, err := strconv.ParseUint(e.args[1], 10, 64)
		if err != nil || id == 0 {
			return fmt.Errorf("%w: %q is not a quarantine id", errUsage, e.args[1])
		}
		return resolve(e, e.args[0], id)
	default:
		return fmt.Errorf("%w: unknown quarantine action %q", errUsage, e.args[0])
	}
}

func resolve(e *env, action string, id uint64) error {
	reason := e.flagString("reason")
	if action == "discard" && reason == "" {
		return fmt.Errorf("%w: discard needs --reason TEXT", errUsage)
	}
	var d engine.Decision
	chain := "" // whose chain holds the record, on a shared store
	a, err := app.Open(e.ctx, e.cfg, app.Options{Logger: e.log, Member: app.MemberFor("quarantine")})
	if err != nil {
		r, rerr := e.remoteFor(err)
		if rerr != nil {
			return rerr
		}
		if e.flagString("operator") != "" {
			return fmt.Errorf("%w: --operator is for a local store: the running daemon names the operator "+
				"from the API token (choose it with --token-name or $%s)", errUsage, EnvToken)
		}
		d, err = r.resolve(action, id, reason)
	} else {
		defer a.Close()
		operator, oerr := localOperator(e.flagString("operator"))
		if oerr != nil {
			return oerr
		}
		if m := a.Engine.Member(); m != "" {
			chain = " of member " + m
		}
		if action == "release" {
			d, err = a.Engine.Release(e.ctx, id, operator)
		} else {
			d, err = a.Engine.Discard(e.ctx, id, reason, operator)
		}
	}
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("no quarantined message #%d", id)
	}
	if err != nil {
		return err
	}
	if action == "release" {
		fmt.Fprintf(e.stdout, "#%d released: %s (audit position %d%s)\n", id, d.Outcome, d.Position, chain)
	} else {
		fmt.Fprintf(e.stdout, "#%d discarded (audit position %d%s)\n", id, d.Position, chain)
	}
	return nil
}

// localOperator is who releases or discards on a local store: --operator,
// else the OS user (os/user, then $USER). The audit record carries it.
func localOperator(flagValue string) (string, error) {
	if name := strings.TrimSpace(flagValue); name != "" {
		// The same rule as a token's name: the audit record shows it as is.
		if strings.ContainsFunc(name, unicode.IsControl) || !utf8.ValidString(name) {
			return "", fmt.Errorf("%w: --operator %q has control characters or invalid UTF-8", errUsage, name)
		}
		return name, nil
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username, nil
	}
	if name := os.Getenv("USER"); name != "" {
		return name, nil
	}
	return "", fmt.Errorf("%w: cannot tell who you are (no OS user name, $USER unset): give --operator NAME", errUsage)
}
