package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/app"
)

func benchFlags(fs *flag.FlagSet) {
	fs.Int("messages", 200000, "distinct incident updates to decide")
	fs.Int("sources", 50, "producers, each with its own sequence")
	fs.Float64("replays", 0.1, "fraction of updates delivered a second time, as after a failover")
	fs.Int("batch", 1000, "messages decided and committed at once (by each member)")
	fs.String("dir", "", "embedded store directory (default: a temporary one, removed afterwards)")
	fs.String("store", "", "a shared store's URL (postgres://… or redis://…) instead of the embedded store: a fresh schema or prefix on it, dropped when the run ends")
	fs.Int("members", 1, "with --store: group members in this process, each dealt every Nth message, as a shared subscription deals them")
	fs.String("journal", "", "with --store: keep each member's journal under this directory, as run does (default: none)")
}

// cmdBench measures durable decisions end to end (app.Bench): a generated
// capture is ingested into a fresh embedded store, or a shared one.
func cmdBench(e *env) error {
	o := app.BenchOptions{Dir: e.flagString("dir"), Store: e.flagString("store"), Journal: e.flagString("journal"), Logger: e.log}
	o.Messages, _ = strconv.Atoi(e.flagString("messages"))
	o.Sources, _ = strconv.Atoi(e.flagString("sources"))
	o.Replays, _ = strconv.ParseFloat(e.flagString("replays"), 64)
	o.Members, _ = strconv.Atoi(e.flagString("members"))
	o.Batch, _ = strconv.Atoi(e.flagString("batch"))
	switch {
	case o.Messages <= 0 || o.Sources <= 0 || o.Replays < 0 || o.Replays > 1:
		return fmt.Errorf("%w: --messages and --sources must be positive, --replays in [0, 1]", errUsage)
	case o.Batch <= 0 || o.Batch > config.MaxBatch:
		return fmt.Errorf("%w: --batch must be from 1 to %d, got %d", errUsage, config.MaxBatch, o.Batch)
	case o.Store != "" && o.Members <= 0:
		return fmt.Errorf("%w: --members must be positive", errUsage)
	case o.Store == "" && o.Members != 1:
		return fmt.Errorf("%w: --members needs --store: members share a store", errUsage)
	case o.Store == "" && o.Journal != "":
		return fmt.Errorf("%w: --journal needs --store: only a shared store's members keep one", errUsage)
	}
	return app.Bench(e.ctx, o, e.stdout)
}
