package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/benchfeed"
	"github.com/replayguard/replayguard/source/file"
	"github.com/replayguard/replayguard/store/postgres"
	"github.com/replayguard/replayguard/store/redis"
)

// BenchOptions say what Bench generates and where it decides it.
type BenchOptions struct {
	Messages int     // distinct incident updates; positive
	Sources  int     // producers, each with its own sequence; positive
	Replays  float64 // fraction of updates delivered a second time, in [0, 1]
	Batch    int     // messages a member decides and commits at once; default 1000
	// Dir is the embedded store's directory; empty: a temporary one,
	// removed afterwards.
	Dir string
	// Store is a shared store's URL (postgres://… or redis://…) to bench
	// on instead of the embedded store, in a fresh schema or prefix, dropped when the run ends.
	Store string
	// Members are the group members in this process with Store, each
	// dealt every Nth message as a shared subscription deals them.
	Members int
	// Journal, with Store, keeps each member's journal under it, as run
	// does; empty: none.
	Journal string
	Logger  *slog.Logger // default: discard
}

// Bench measures durable decisions end to end: a generated capture of
// ~280-byte incident updates with replays is ingested into a fresh store
// (the embedded one, fsync per batch, or a shared one), the way ingest
// does it, and the rate is printed to w.
func Bench(ctx context.Context, opts BenchOptions, w io.Writer) error {
	tmp, err := os.MkdirTemp("", "replayguard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if opts.Store != "" {
		return benchShared(ctx, opts, tmp, w)
	}
	dir := opts.Dir
	if dir == "" {
		dir = filepath.Join(tmp, "data")
	}
	cfg, err := config.Parse(fmt.Appendf(nil, benchfeed.Route, dir), "(bench)", nil)
	if err != nil {
		return err
	}
	// The feed is written to a file first and read from it, as ingest
	// reads a capture: the process holds neither.
	feeds, size, err := writeFeeds(tmp, opts, 1)
	if err != nil {
		return err
	}
	feed := feeds[0]
	defer feed.Close()
	a, err := Open(ctx, cfg, Options{Logger: opts.Logger})
	if err != nil {
		return err
	}
	defer a.Close()
	start, cpu0 := time.Now(), processCPU()
	sum, err := file.Ingest(ctx, a.Engine, feed, file.Options{Name: "bench", BatchSize: opts.Batch})
	took, cpu := time.Since(start), processCPU()-cpu0
	if err != nil {
		return err
	}
	perMsg := ""
	if cpu0 >= 0 && sum.Lines > 0 {
		perMsg = fmt.Sprintf(", %.2f µs CPU per message", float64(cpu.Microseconds())/float64(sum.Lines))
	}
	fmt.Fprintf(w, "%s (%d MB) in %.2f s: %.0f msg/s durable%s, embedded store at %s\n%s\n",
		counted(sum.Lines, "message", "messages"), size>>20, took.Seconds(), float64(sum.Lines)/took.Seconds(), perMsg, dir, sum)
	return nil
}

// writeFeeds writes the generated capture to files in dir, dealt
// round-robin to n of them as a shared subscription deals the deliveries
// to n members, and returns them open at their start, with their size.
func writeFeeds(dir string, opts BenchOptions, n int) ([]*os.File, int64, error) {
	files := make([]*os.File, 0, n)
	fail := func(err error) ([]*os.File, int64, error) {
		for _, f := range files {
			_ = f.Close()
		}
		return nil, 0, fmt.Errorf("write the bench feed: %w", err)
	}
	bufs := make([]*bufio.Writer, n)
	for i := range n {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("feed-%d.jsonl", i+1)))
		if err != nil {
			return fail(err)
		}
		files = append(files, f)
		bufs[i] = bufio.NewWriterSize(f, 1<<16)
	}
	var size int64
	var line []byte
	k := 0
	for m := range benchfeed.Each(opts.Messages, opts.Sources, opts.Replays) {
		line = benchfeed.AppendLine(line[:0], &m)
		if _, err := bufs[k%n].Write(line); err != nil {
			return fail(err)
		}
		size += int64(len(line))
		k++
	}
	for i, f := range files {
		if err := bufs[i].Flush(); err != nil {
			return fail(err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fail(err)
		}
	}
	return files, size, nil
}

// sharedBench is one run of Bench on a shared store.
type sharedBench struct {
	kind, run string // the store kind; the run's schema or prefix name
	cfg       *config.Config
}

// benchShared ingests the feed into a fresh schema (PostgreSQL) or prefix
// (Redis) of the shared store at opts.Store, dealt round-robin to
// opts.Members engines that each hold a member id, and reports the group's
// rate and how often a batch lost a race to another member. With
// opts.Journal set, each member keeps its journal under it (JournalDir),
// synced before every ack. The schema or prefix is dropped when it ends.
func benchShared(ctx context.Context, opts BenchOptions, tmp string, w io.Writer) (err error) {
	b, err := newSharedBench(opts.Store, opts.Journal)
	if err != nil {
		return err
	}
	// After every member closed (deferred below, so run before this).
	defer func() { err = errors.Join(err, b.drop(context.WithoutCancel(ctx), w)) }()
	apps := make([]*App, opts.Members)
	for i := range apps {
		c := *b.cfg
		c.Store.Member = fmt.Sprintf("bench-%d", i+1)
		if apps[i], err = Open(ctx, &c, Options{Logger: opts.Logger, Journal: opts.Journal != ""}); err != nil {
			return err
		}
		defer apps[i].Close()
	}
	feeds, _, err := writeFeeds(tmp, opts, len(apps))
	if err != nil {
		return err
	}
	for _, f := range feeds {
		defer f.Close()
	}
	start, cpu0 := time.Now(), processCPU()
	sums, err := ingestEach(ctx, apps, feeds, opts.Batch)
	took, cpu := time.Since(start), processCPU()-cpu0
	if err != nil {
		return err
	}
	if cpu0 < 0 {
		cpu = -1
	}
	b.print(w, apps, sums, took, cpu, opts.Journal)
	return nil
}

// drop removes the run's schema or prefix from the store, and says so.
func (b *sharedBench) drop(ctx context.Context, w io.Writer) error {
	url := b.cfg.Store.URL
	if b.kind == config.StorePostgres {
		if n, err := postgres.SchemaSize(ctx, url, b.run); err == nil {
			fmt.Fprintf(w, "schema %s held %d MB\n", b.run, n>>20)
		}
		if err := postgres.DropSchema(ctx, url, b.run); err != nil {
			return err
		}
		fmt.Fprintf(w, "schema %s dropped\n", b.run)
		return nil
	}
	if n, err := redis.PrefixSize(ctx, url, b.cfg.Store.Prefix); err == nil {
		fmt.Fprintf(w, "prefix %s held %d MB (MEMORY USAGE)\n", b.cfg.Store.Prefix, n>>20)
	}
	n, err := redis.DropPrefix(ctx, url, b.cfg.Store.Prefix)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "prefix %s deleted: %s\n", b.cfg.Store.Prefix, counted(n, "key", "keys"))
	return nil
}

// newSharedBench configures a fresh schema or prefix on the store at url.
func newSharedBench(url, journal string) (*sharedBench, error) {
	kind, ok := map[string]string{"postgres": config.StorePostgres, "postgresql": config.StorePostgres,
		"redis": config.StoreRedis, "rediss": config.StoreRedis}[strings.SplitN(url, "://", 2)[0]]
	if !ok {
		return nil, fmt.Errorf("%w: --store wants a postgres:// or redis:// URL", ErrUsage)
	}
	b := &sharedBench{kind: kind, run: fmt.Sprintf("bench_%d", time.Now().UnixNano())}
	cfg, err := config.Parse(fmt.Appendf(nil, benchfeed.Route, "unused"), "(bench)", nil)
	if err != nil {
		return nil, err
	}
	cfg.Store = config.StoreConfig{Kind: kind, URL: url, Journal: config.JournalConfig{Path: journal}}
	if kind == config.StorePostgres {
		cfg.Store.Schema = b.run
	} else {
		cfg.Store.Prefix = "{" + b.run + "}:"
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b.cfg = cfg
	return b, nil
}

// ingestEach ingests captures[i] on apps[i], all at once, batch messages a
// commit.
func ingestEach(ctx context.Context, apps []*App, captures []*os.File, batch int) ([]file.Summary, error) {
	sums := make([]file.Summary, len(apps))
	errs := make([]error, len(apps))
	var wg sync.WaitGroup
	for i := range apps {
		wg.Go(func() {
			sums[i], errs[i] = file.Ingest(ctx, apps[i].Engine, captures[i], file.Options{Name: "bench", BatchSize: batch})
		})
	}
	wg.Wait()
	return sums, errors.Join(errs...)
}

// print reports the group's rate, the CPU this process (every member: the
// client side) took per message (cpu < 0: unknown), its batches' lost races,
// lock waits and rows found held, and the outcomes.
func (b *sharedBench) print(w io.Writer, apps []*App, sums []file.Summary, took, cpu time.Duration, journal string) {
	var total int64
	var updates, retries, waits, held uint64
	outcomes := map[string]int64{}
	for i, a := range apps {
		total += sums[i].Lines
		for o, n := range sums[i].Outcomes {
			outcomes[o.String()] += n
		}
		if rep := a.Store.Capabilities().Stats; rep != nil {
			st := rep.SharedStats()
			updates, retries, waits, held = updates+st.Updates, retries+st.Retries, waits+st.LockWaits, held+st.HeldRows
		}
	}
	where := "schema " + b.run
	if b.kind == config.StoreRedis {
		where = "prefix {" + b.run + "}:"
	}
	if journal != "" {
		where += ", journal under " + journal
	}
	perMsg := ""
	if cpu >= 0 && total > 0 {
		perMsg = fmt.Sprintf(", %.2f µs CPU per message in this process", float64(cpu.Microseconds())/float64(total))
	}
	fmt.Fprintf(w, "%s in %.2f s: %.0f msg/s durable, %s on the %s store (%s)%s\n",
		counted(total, "message", "messages"), took.Seconds(), float64(total)/took.Seconds(), counted(len(apps), "member", "members"), b.kind, where, perMsg)
	pct := 0.0
	if updates > 0 {
		pct = 100 * float64(retries) / float64(updates)
	}
	fmt.Fprintf(w, "batches %d, retried after a lost race %d (%.2f%%), waits for a row lock %d, rows found held by another member (their messages decided in a batch after) %d; outcomes applied=%d applied_late=%d duplicate=%d conflict=%d quarantined=%d malformed=%d\n",
		updates, retries, pct, waits, held, outcomes["applied"], outcomes["applied_late"], outcomes["duplicate"], outcomes["conflict"],
		outcomes["quarantined"], outcomes["malformed"])
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
