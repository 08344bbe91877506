// Command bench measures replayguard side by side with what a user would
// pick instead, in one run, on one generated feed (internal/benchfeed):
//
//   - durable dedup ingest: `replayguard bench`'s path against NATS
//     JetStream (file store, async publish with Nats-Msg-Id);
//   - the same at a million sources (a meter fleet) against 50 sources;
//   - MQTT end to end, live and backlog drain: `replayguard run` against a
//     no-op auto-acking paho consumer, each on a fresh Mosquitto;
//   - MQTT 3.1.1 end to end, live and backlog drain: `replayguard run`
//     with mqtt.protocol 3.1.1 against a no-op auto-acking
//     paho.mqtt.golang consumer;
//   - JetStream end to end: `replayguard run` with input jetstream against a
//     no-op nats.go pull consumer acking each message, each on a fresh
//     nats-server whose stream holds the same deliveries;
//   - Sparkplug B end to end, live and backlog drain: `replayguard run` with
//     a sparkplug route against the no-op paho consumer, each on a fresh
//     Mosquitto, on a feed of Sparkplug edge nodes (spfeed.go);
//   - decode and decide on one core: the engine on its in-memory store
//     against Watermill's Deduplicator keyed on a metadata id, and with its
//     default Adler-32 payload hasher.
//
// Every tool gets the same messages and its result is checked against the
// feed: the distinct updates kept, none dropped, none kept twice. Each
// figure is the median of alternating rounds. It prints the table to
// stdout, a progress bar to stderr on a terminal and, with -o, rewrites its
// section of BENCHMARKS.md:
//
//	cd bench && go run . -o ../BENCHMARKS.md
//
// nats-server and mosquitto are started from PATH on free loopback ports.
// It is a module of its own so that no peer becomes a dependency of
// replayguard.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/replayguard/replayguard/internal/benchfeed"
)

type options struct {
	messages, mqttMessages, sources, rounds int
	fleetMessages, fleetSources             int
	replays                                 float64
	rows, out, cpuProfile                   string
}

func main() {
	var o options
	flag.IntVar(&o.messages, "messages", 200000, "distinct updates in the feed (ingest and decide rows)")
	flag.IntVar(&o.mqttMessages, "mqtt-messages", 50000, "deliveries in the MQTT, JetStream and Sparkplug rows: the feed's first ones, replays included")
	flag.IntVar(&o.sources, "sources", 50, "producers in the feed, each with its own sequence")
	flag.IntVar(&o.fleetMessages, "fleet-messages", 1000000, "distinct updates in the fleet row's feeds")
	flag.IntVar(&o.fleetSources, "fleet-sources", 1000000, "producers in the fleet row's large feed (its other feed has 50)")
	flag.Float64Var(&o.replays, "replays", 0.1, "fraction of updates delivered a second time, as after a failover")
	flag.IntVar(&o.rounds, "rounds", 5, "alternating rounds per row; the table shows medians")
	flag.StringVar(&o.rows, "rows", "ingest,fleet,live,backlog,forward,redundant,mqtt311,mqtt311-backlog,jetstream,sparkplug,sparkplug-backlog,engine,decide", "rows to run, comma-separated")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the harness's process (the in-process sides: replayguard run, the peers' clients) to this file; replayguard's samples carry the label side=replayguard (go tool pprof -tagfocus side=replayguard)")
	flag.StringVar(&o.out, "o", "", "BENCHMARKS.md to rewrite the peers section of (default: print only)")
	flag.Parse()
	if err := run(o, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options, args []string) error {
	if o.messages <= 0 || o.mqttMessages <= 0 || o.sources <= 0 || o.fleetMessages <= 0 || o.fleetSources <= 0 ||
		o.rounds <= 0 || o.replays < 0 || o.replays > 1 {
		return fmt.Errorf("sizes and -rounds must be positive, -replays in [0, 1]")
	}
	m := machine()
	feed := benchfeed.Generate(o.messages, o.sources, o.replays)
	mqttFeed := feed[:min(o.mqttMessages, len(feed))]
	sp := generateSparkplug(o.mqttMessages, spEdges, o.replays)
	tmp, err := os.MkdirTemp("", "replayguard-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	rows, err := selectRows(o.rows, buildRows(o, feed, mqttFeed, sp, m, &engineBench{bin: built{dir: tmp}}, &built{dir: tmp}))
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	started := time.Now()
	p := newProgress(os.Stderr, o.rounds*sides(rows))
	for i := range rows {
		rows[i].measure(o.rounds, p)
	}
	p.done()
	m.loadAfter = loadAverage()
	rep := report{opts: o, args: args, machine: m, rows: rows, feed: feedInfo(feed, mqttFeed) + ". " + spFeedInfo(sp), took: time.Since(started)}
	text := rep.markdown()
	fmt.Print(text)
	if o.out != "" {
		return writeSection(o.out, text)
	}
	return nil
}

func selectRows(names string, all []row) ([]row, error) {
	var out []row
	for _, n := range strings.Split(names, ",") {
		found := false
		for _, r := range all {
			if r.id == strings.TrimSpace(n) {
				out, found = append(out, r), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-rows: no row %q (ingest, fleet, live, backlog, forward, redundant, mqtt311, mqtt311-backlog, jetstream, sparkplug, sparkplug-backlog, engine, decide)", n)
		}
	}
	return out, nil
}

func feedInfo(feed, mqttFeed []benchfeed.Message) string {
	size := 0
	for i := range feed {
		size += len(feed[i].Payload)
	}
	return fmt.Sprintf("%s deliveries of %s distinct incident updates (%d-byte payloads on average, %s replays in failover bursts); "+
		"the MQTT rows publish its first %s deliveries (%s replays)",
		count(len(feed)), count(benchfeed.Unique(feed)), size/len(feed), count(len(feed)-benchfeed.Unique(feed)),
		count(len(mqttFeed)), count(len(mqttFeed)-benchfeed.Unique(mqttFeed)))
}
