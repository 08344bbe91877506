package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/internal/benchfeed"
)

// ingestReplayguard runs `replayguard bench` itself, a process of its own as
// a user runs it: it generates the same feed from the same parameters
// (internal/benchfeed, fixed seed), ingests it as a capture into a fresh
// embedded store, batches of 1000, fsync per commit (the batches that
// queue behind a commit share the next), and prints its rate, its CPU time
// per message (the ingest's, the feed's generation excluded) and the count
// of each outcome. The check is on those counts: applied and applied late
// must be the distinct updates and the rest duplicates.
func ingestReplayguard(h *harness, bin *built, o options, feed []benchfeed.Message) result {
	return benchReplayguard(h, bin, o.messages, o.sources, o.replays, len(feed), benchfeed.Unique(feed))
}

// ingestFleet is ingestReplayguard on the fleet row's feed: o.fleetMessages
// updates from sources producers. The deliveries and distinct updates it
// is checked against are counted as the feed is generated, not held.
func ingestFleet(h *harness, bin *built, o options, sources int) result {
	total, unique := 0, 0
	for m := range benchfeed.Each(o.fleetMessages, sources, o.replays) {
		total++
		if !m.Replay {
			unique++
		}
	}
	return benchReplayguard(h, bin, o.fleetMessages, sources, o.replays, total, unique)
}

// benchReplayguard runs `replayguard bench` on the feed of messages updates
// from sources producers, which holds total deliveries of unique distinct
// updates.
func benchReplayguard(h *harness, bin *built, messages, sources int, replays float64, total, unique int) result {
	path := bin.get(h, "replayguard", "build", "./cmd/replayguard")
	out, err := exec.Command(path, "bench", "--messages", fmt.Sprint(messages), "--sources", fmt.Sprint(sources),
		"--replays", fmt.Sprint(replays)).CombinedOutput()
	if err != nil {
		h.Fatalf("replayguard bench: %v\n%s", err, out)
	}
	res, err := benchResult(out, total, unique)
	if err != nil {
		h.Fatal(err)
	}
	return res
}

// benchResult reads the output of `replayguard bench` on a feed of total
// deliveries of unique distinct updates: its rate, CPU time and the check
// of its outcome counts. An output it cannot read, a count of decisions
// other than total, or a delivery held or left undecided is an error.
func benchResult(out []byte, total, unique int) (result, error) {
	m := benchLine.FindSubmatch(out)
	if m == nil {
		return result{}, fmt.Errorf("replayguard bench printed no rate:\n%s", out)
	}
	rate, _ := strconv.ParseFloat(string(m[1]), 64)
	cpu, _ := strconv.ParseFloat(string(m[2]), 64)
	outcomes := map[string]int{}
	for _, kv := range benchOutcome.FindAllSubmatch(out, -1) {
		outcomes[string(kv[1])], _ = strconv.Atoi(string(kv[2]))
	}
	if outcomes["total"] != total {
		return result{}, fmt.Errorf("replayguard bench decided %d deliveries, the harness's feed has %d:\n%s", outcomes["total"], total, out)
	}
	if held := outcomes["conflict"] + outcomes["quarantined"] + outcomes["malformed"]; held > 0 {
		return result{}, fmt.Errorf("replayguard bench held %d deliveries of a clean feed:\n%s", held, out)
	}
	// total counts the lines read: every one must have an outcome.
	effective := outcomes["applied"] + outcomes["applied_late"]
	if decided := effective + outcomes["duplicate"]; decided != total {
		return result{}, fmt.Errorf("replayguard bench gave %d of %d deliveries an outcome:\n%s", decided, total, out)
	}
	// With every delivery applied, applied late or duplicate, the applied
	// count alone says whether a replay was taken for new or an update for
	// a replay.
	return result{rate: rate, cpu: cpu / 1e6, check: countCheck(total, unique, effective)}, nil
}

var (
	// benchLine is the first line `replayguard bench` prints.
	benchLine = regexp.MustCompile(`: ([0-9.]+) msg/s durable, ([0-9.]+) µs CPU per message`)
	// benchOutcome is one count of its summary line.
	benchOutcome = regexp.MustCompile(`\b(applied|applied_late|duplicate|conflict|quarantined|malformed|total)=([0-9]+)`)
)

// ingestJetStream publishes the feed to a JetStream stream on file storage
// with a duplicate window, asynchronously (the client's default of 4000
// publishes awaiting their acknowledgement), each message with Nats-Msg-Id
// set to its idempotency key. The server fsyncs on its own interval, not
// per message. The timer runs from the first publish to the last
// acknowledgement (CPU time: the client's and the server's); a message counts as kept when its acknowledgement does
// not say duplicate, and the stream's message count must agree.
func ingestJetStream(h *harness, srv *natsServer, feed []benchfeed.Message) result {
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		h.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		h.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := fmt.Sprintf("INCIDENTS_%d", time.Now().UnixNano())
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
		Storage: jetstream.FileStorage, Duplicates: time.Hour})
	if err != nil {
		h.Fatal(err)
	}
	defer js.DeleteStream(context.Background(), name)
	subjects, keys := make([]string, len(feed)), make([]string, len(feed)) // made before the timer starts
	for i := range feed {
		subjects[i] = name + "." + strings.ReplaceAll(strings.TrimPrefix(feed[i].Topic, "incidents/"), "/", ".")
		keys[i] = feed[i].Key()
	}
	acks := make([]jetstream.PubAckFuture, len(feed))
	cpu := cpuTime(syscall.RUSAGE_SELF) + srv.cpuTime(h)
	start := time.Now()
	for i := range feed {
		if acks[i], err = js.PublishAsync(subjects[i], feed[i].Payload, jetstream.WithMsgID(keys[i])); err != nil {
			h.Fatalf("publish %d: %v", i, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		h.Fatalf("JetStream: %d publishes unacknowledged", js.PublishAsyncPending())
	}
	took := time.Since(start)
	cpu = cpuTime(syscall.RUSAGE_SELF) + srv.cpuTime(h) - cpu
	kept := make([]bool, len(feed))
	for i, f := range acks {
		select {
		case ack := <-f.Ok():
			kept[i] = !ack.Duplicate
		case err := <-f.Err():
			h.Fatalf("publish %d: %v", i, err)
		}
	}
	c := keptCheck(feed, kept)
	info, err := stream.Info(ctx)
	if err != nil {
		h.Fatal(err)
	}
	if int(info.State.Msgs) != c.kept {
		h.Fatalf("JetStream acknowledged %d messages as new but its stream holds %d", c.kept, info.State.Msgs)
	}
	return result{rate: float64(len(feed)) / took.Seconds(), cpu: cpu.Seconds() / float64(len(feed)), check: c}
}
