package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/benchfeed"
	"github.com/replayguard/replayguard/source/file"
)

func benchFlags(fs *flag.FlagSet) {
	fs.Int("messages", 200000, "distinct incident updates to decide")
	fs.Int("sources", 50, "producers, each with its own sequence")
	fs.Float64("replays", 0.1, "fraction of updates delivered a second time, as after a failover")
	fs.String("dir", "", "embedded store directory (default: a temporary one, removed afterwards)")
}

// cmdBench measures durable decisions end to end: a generated capture of
// ~280-byte incident updates with replays is ingested into a fresh embedded
// store (fsync per batch), the way `ingest` does it.
func cmdBench(e *env) error {
	n, _ := strconv.Atoi(e.flagString("messages"))
	sources, _ := strconv.Atoi(e.flagString("sources"))
	replays, _ := strconv.ParseFloat(e.flagString("replays"), 64)
	if n <= 0 || sources <= 0 || replays < 0 || replays > 1 {
		return fmt.Errorf("%w: --messages and --sources must be positive, --replays in [0, 1]", errUsage)
	}
	dir := e.flagString("dir")
	if dir == "" {
		tmp, err := os.MkdirTemp("", "replayguard-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = filepath.Join(tmp, "data")
	}
	cfg, err := config.Parse(fmt.Appendf(nil, benchfeed.Route, dir), "(bench)", nil)
	if err != nil {
		return err
	}
	feed := benchfeed.Capture(benchfeed.Generate(n, sources, replays))
	a, err := app.Open(e.ctx, cfg, app.Options{Logger: e.log})
	if err != nil {
		return err
	}
	defer a.Close()
	start := time.Now()
	sum, err := file.Ingest(e.ctx, a.Engine, bytes.NewReader(feed), file.Options{Name: "bench"})
	took := time.Since(start)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%d messages (%d MB) in %.2f s: %.0f msg/s durable, embedded store at %s\n%s\n",
		sum.Lines, len(feed)>>20, took.Seconds(), float64(sum.Lines)/took.Seconds(), dir, sum)
	return nil
}
