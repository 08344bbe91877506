package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/replayguard/replayguard/internal/app"
)

func auditFlags(fs *flag.FlagSet) {
	fs.String("from", "1", "export: first position")
	fs.String("file", "", "verify: an exported JSONL file instead of the store")
	fs.String("archive", "", "verify: the audit archive directory too, with the store as one chain (on a shared store: each member's chain with its part of the archive)")
	fs.String("reason", "", "forget-sink: why the sink is gone for good (required)")
	fs.String("operator", "", "forget-sink: who decides, for the audit (default the OS user)")
	tokenNameFlag(fs)
}

func cmdAudit(e *env) error {
	if len(e.args) == 0 {
		return fmt.Errorf("%w: audit takes export, verify or forget-sink NAME", errUsage)
	}
	switch e.args[0] {
	case "forget-sink":
		if len(e.args) == 1 {
			return fmt.Errorf("%w: audit forget-sink takes the sink's name", errUsage)
		}
		if len(e.args) > 2 {
			return fmt.Errorf("%w: audit forget-sink takes one sink name, got %q", errUsage, e.args[1:])
		}
		if err := e.actionFlags("audit forget-sink", "reason", "operator"); err != nil {
			return err
		}
		return e.tool().ForgetSink(e.ctx, e.args[1], e.flagString("reason"), e.flagString("operator"))
	case "export", "verify":
		if len(e.args) > 1 {
			return fmt.Errorf("%w: audit %s takes no arguments, got %q", errUsage, e.args[0], e.args[1:])
		}
	}
	switch e.args[0] {
	case "export":
		if err := e.actionFlags("audit export", "from"); err != nil {
			return err
		}
		from, err := strconv.ParseUint(e.flagString("from"), 10, 64)
		if err != nil || from == 0 {
			return fmt.Errorf("%w: --from wants a position >= 1", errUsage)
		}
		return e.tool().AuditExport(e.ctx, from)
	case "verify":
		if err := e.actionFlags("audit verify", "file", "archive"); err != nil {
			return err
		}
		if e.flagString("file") != "" && e.flagString("archive") != "" {
			// An export is verified on its own: the archive would go unread.
			return fmt.Errorf("%w: audit verify takes --file or --archive, not both", errUsage)
		}
		// A file's end is compared with the store's chain heads when a
		// configuration names the store it came from.
		return e.tool().AuditVerify(e.ctx, app.AuditVerifyOptions{File: e.flagString("file"), Archive: e.flagString("archive"),
			Store: e.cfgSrc != cfgDefaults})
	default:
		return fmt.Errorf("%w: unknown audit action %q", errUsage, e.args[0])
	}
}
