package main

import (
	"errors"
	"flag"

	"github.com/replayguard/replayguard/internal/app"
)

func cmdRun(e *env) error {
	return app.Run(e.ctx, e.cfg, e.log, app.Build{Version: version, Commit: buildCommit()})
}

func demoFlags(fs *flag.FlagSet) {}

func cmdDemo(e *env) error {
	return errors.New("demo: not wired yet")
}
