package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/internal/app"
)

func explainFlags(fs *flag.FlagSet) {
	fs.String("field", "", "one field's changes only")
	fs.String("at", "", "the entity as the picture showed it then: RFC 3339, or a duration back from now (2h)")
	fs.Bool("json", false, "print JSON")
	fs.String("archive", "", "the audit archive to read what retention moved out of the store from (default: audit.archive)")
	tokenNameFlag(fs)
}

func cmdExplain(e *env) error {
	if len(e.args) != 1 || e.args[0] == "" {
		return fmt.Errorf("%w: explain takes one entity, as `state` names it (incident/7)", errUsage)
	}
	opts := app.ExplainOptions{Entity: e.args[0], Field: e.flagString("field"), JSON: e.flagBool("json"), Archive: e.flagString("archive")}
	var err error
	if opts.At, err = parseWhen(e.flagString("at"), time.Now()); err != nil {
		return fmt.Errorf("%w: --at: %v", errUsage, err)
	}
	return e.tool().Explain(e.ctx, opts)
}
