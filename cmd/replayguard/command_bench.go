package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	start, cpu0 := time.Now(), processCPU()
	sum, err := file.Ingest(e.ctx, a.Engine, bytes.NewReader(feed), file.Options{Name: "bench"})
	took, cpu := time.Since(start), processCPU()-cpu0
	if err != nil {
		return err
	}
	perMsg := ""
	if cpu0 >= 0 && sum.Lines > 0 {
		perMsg = fmt.Sprintf(", %.2f µs CPU per message", float64(cpu.Microseconds())/float64(sum.Lines))
	}
	fmt.Fprintf(e.stdout, "%d messages (%d MB) in %.2f s: %.0f msg/s durable%s, embedded store at %s\n%s\n",
		sum.Lines, len(feed)>>20, took.Seconds(), float64(sum.Lines)/took.Seconds(), perMsg, dir, sum)
	return nil
}

// processCPU is the CPU time (user and system) the process used so far, read
// from /proc/self/stat in clock ticks of 10 ms; -1 where there is no /proc.
// On a shared machine it is steadier than the elapsed time.
func processCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:])) // state is field 3; utime and stime are 14 and 15
	if len(f) < 13 {
		return -1
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(user+sys) * tick
}
