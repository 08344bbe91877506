package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/demo"
)

func cmdRun(e *env) error {
	err := app.Run(e.ctx, e.cfg, e.log, app.Build{Version: version, Commit: buildCommit()})
	var ve *config.ValidationError
	if errors.As(err, &ve) && ve.File == "" { // a sql statement the server refuses, in lint's words
		ve.File = e.cfgSrc
	}
	return err
}

func demoFlags(fs *flag.FlagSet) {
	fs.String("story", demo.StoryIncident, "the story told: "+strings.Join(demo.Stories, ", "))
	fs.String("listen", demo.DefaultListen, "dashboard address (loopback; a free port when taken)")
	fs.Duration("hold", 0, "keep the dashboard up this long after the story (e.g. 5m)")
	fs.Duration("pace", demo.DefaultPace, "pause between the story's steps")
	fs.String("report", filepath.Join(os.TempDir(), "replayguard-demo-report.html"), "write the after-action report here (\"\": none)")
}

func cmdDemo(e *env) error {
	story := e.flagString("story")
	if !slices.Contains(demo.Stories, story) {
		return fmt.Errorf("%w: --story %q: the stories are %s", errUsage, story, storyList())
	}
	hold, _ := time.ParseDuration(e.flagString("hold"))
	pace, _ := time.ParseDuration(e.flagString("pace"))
	log := e.log
	if e.flagString("log-level") == "info" { // the story narrates; component logs only on errors by default
		log = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	err := demo.Run(e.ctx, e.stdout, demo.Options{Story: story, Listen: e.flagString("listen"), Hold: hold, Pace: pace,
		Report: e.flagString("report"), Version: version, Logger: log})
	if errors.Is(err, demo.ErrOptions) { // a flag's value: a command-line mistake
		return fmt.Errorf("%w: %s", errUsage, strings.TrimPrefix(err.Error(), demo.ErrOptions.Error()+": "))
	}
	return err
}

// storyList names the demo's stories as a sentence does: "a, b and c".
func storyList() string {
	n := len(demo.Stories)
	if n < 2 {
		return strings.Join(demo.Stories, "")
	}
	return strings.Join(demo.Stories[:n-1], ", ") + " and " + demo.Stories[n-1]
}
