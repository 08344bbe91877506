package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/source/file"
)

func benchFlags(fs *flag.FlagSet) {
	fs.Int("messages", 200000, "distinct incident updates to decide")
	fs.Int("sources", 50, "producers, each with its own sequence")
	fs.Float64("replays", 0.1, "fraction of updates delivered a second time, as after a failover")
	fs.String("dir", "", "embedded store directory (default: a temporary one, removed afterwards)")
}

// benchConfig is the route the benchmark feed uses, on an embedded store.
const benchConfig = `
store: {kind: embedded, path: %q}
routes:
  - name: incidents
    topic: incidents/#
    source: [agency, source_id]
    sequence: sequence
    epoch: boot_id
    effects:
      - entity: "incident/{incident_id}"
        add: {casualties: casualty_delta}
      - entity: "unit/{unit_id}"
        set: {status: unit_status}
`

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
	cfg, err := config.Parse(fmt.Appendf(nil, benchConfig, dir), "(bench)", nil)
	if err != nil {
		return err
	}
	feed := benchFeed(n, sources, replays)
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

// benchFeed generates the capture: n updates round-robin over the sources,
// each replayed later with probability replays.
func benchFeed(n, sources int, replays float64) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	var held [][]byte
	seq := make([]int, sources)
	for i := 0; i < n; i++ {
		s := i % sources
		seq[s]++
		line := fmt.Appendf(nil, `{"topic":"incidents/county-fire/mdt-%03d","payload":{"agency":"county-fire","source_id":"mdt-%03d",`+
			`"boot_id":1,"sequence":%d,"incident_id":"INC-%04d","unit_id":"E%d","unit_status":"enroute","casualty_delta":%d,`+
			`"lat":38.8977,"lon":-77.0365,"note":"structure fire, 2nd alarm"}}`+"\n", s, s, seq[s], seq[s]%97, s, rng.IntN(2))
		b.Write(line)
		if rng.Float64() < replays {
			held = append(held, line)
		}
		if len(held) > 0 && rng.IntN(100) == 0 { // a failover burst
			for _, l := range held {
				b.Write(l)
			}
			held = held[:0]
		}
	}
	for _, l := range held {
		b.Write(l)
	}
	return b.Bytes()
}
