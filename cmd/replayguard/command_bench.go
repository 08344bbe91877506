package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	fs.String("store", "", "a shared store's URL (postgres://… or redis://…) instead of the embedded store: a fresh schema or prefix on it")
	fs.Int("members", 1, "with --store: group members in this process, each dealt every Nth message, as a shared subscription deals them")
	fs.String("journal", "", "with --store: keep each member's journal under this directory, as run does (default: none)")
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
	members, _ := strconv.Atoi(e.flagString("members"))
	if url := e.flagString("store"); url != "" {
		if members <= 0 {
			return fmt.Errorf("%w: --members must be positive", errUsage)
		}
		return benchShared(e, url, members, e.flagString("journal"), benchfeed.Generate(n, sources, replays))
	}
	if members != 1 {
		return fmt.Errorf("%w: --members needs --store: members share a store", errUsage)
	}
	if e.flagString("journal") != "" {
		return fmt.Errorf("%w: --journal needs --store: only a shared store's members keep one", errUsage)
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

// benchShared ingests the feed into a fresh schema (PostgreSQL) or prefix
// (Redis) of the shared store at url, dealt round-robin to members engines
// that each hold a member id, and reports the group's rate and how often a
// batch lost a race to another member. With journal set, each member keeps
// its journal under it (app.JournalDir), synced before every ack.
func benchShared(e *env, url string, members int, journal string, msgs []benchfeed.Message) error {
	kind, ok := map[string]string{"postgres": config.StorePostgres, "postgresql": config.StorePostgres,
		"redis": config.StoreRedis, "rediss": config.StoreRedis}[strings.SplitN(url, "://", 2)[0]]
	if !ok {
		return fmt.Errorf("%w: --store wants a postgres:// or redis:// URL", errUsage)
	}
	run := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	cfg, err := config.Parse(fmt.Appendf(nil, benchfeed.Route, "unused"), "(bench)", nil)
	if err != nil {
		return err
	}
	cfg.Store = config.StoreConfig{Kind: kind, URL: url, Journal: config.JournalConfig{Path: journal}}
	if kind == config.StorePostgres {
		cfg.Store.Schema = run
	} else {
		cfg.Store.Prefix = "{" + run + "}:"
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	apps := make([]*app.App, members)
	for i := range apps {
		c := *cfg
		c.Store.Member = fmt.Sprintf("bench-%d", i+1)
		if apps[i], err = app.Open(e.ctx, &c, app.Options{Logger: e.log, Journal: journal != ""}); err != nil {
			return err
		}
		defer apps[i].Close()
	}
	feeds := make([][]benchfeed.Message, members)
	for i, m := range msgs {
		feeds[i%members] = append(feeds[i%members], m)
	}
	sums := make([]file.Summary, members)
	errs := make([]error, members)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range apps {
		wg.Go(func() {
			sums[i], errs[i] = file.Ingest(e.ctx, apps[i].Engine, bytes.NewReader(benchfeed.Capture(feeds[i])), file.Options{Name: "bench"})
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var total int64
	var updates, retries, waits uint64
	outcomes := map[string]int64{}
	for i, a := range apps {
		total += sums[i].Lines
		for o, n := range sums[i].Outcomes {
			outcomes[o.String()] += n
		}
		if rep := a.Store.Capabilities().Stats; rep != nil {
			st := rep.SharedStats()
			updates, retries, waits = updates+st.Updates, retries+st.Retries, waits+st.LockWaits
		}
	}
	where := "schema " + run
	if kind == config.StoreRedis {
		where = "prefix {" + run + "}:"
	}
	if journal != "" {
		where += ", journal under " + journal
	}
	fmt.Fprintf(e.stdout, "%d messages in %.2f s: %.0f msg/s durable, %d member(s) on the %s store (%s)\n",
		total, took.Seconds(), float64(total)/took.Seconds(), members, kind, where)
	pct := 0.0
	if updates > 0 {
		pct = 100 * float64(retries) / float64(updates)
	}
	fmt.Fprintf(e.stdout, "batches %d, retried after a lost race %d (%.2f%%), waits for a row lock %d; outcomes applied=%d applied_late=%d duplicate=%d conflict=%d quarantined=%d malformed=%d\n",
		updates, retries, pct, waits, outcomes["applied"], outcomes["applied_late"], outcomes["duplicate"], outcomes["conflict"],
		outcomes["quarantined"], outcomes["malformed"])
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
