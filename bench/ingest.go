package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/benchfeed"
	"github.com/replayguard/replayguard/source/file"
)

// ingestReplayguard is `replayguard bench`: the feed as a capture ingested
// into a fresh embedded store, fsync per batch of 1000. The timer runs
// over the ingest, the store's opening excluded.
func ingestReplayguard(h *harness, feed []benchfeed.Message, capture []byte) result {
	cfg, err := config.Parse(fmt.Appendf(nil, benchfeed.Route, filepath.Join(h.TempDir(), "data")), "(bench)", nil)
	if err != nil {
		h.Fatal(err)
	}
	a, err := app.Open(context.Background(), cfg, app.Options{})
	if err != nil {
		h.Fatal(err)
	}
	defer a.Close()
	rec := &recorder{p: a.Engine, kept: make([]bool, 0, len(feed))}
	cpu := cpuTime(syscall.RUSAGE_SELF)
	start := time.Now()
	if _, err := file.Ingest(context.Background(), rec, bytes.NewReader(capture), file.Options{Name: "bench"}); err != nil {
		h.Fatal(err)
	}
	took := time.Since(start)
	cpu = cpuTime(syscall.RUSAGE_SELF) - cpu
	if len(rec.kept) != len(feed) {
		h.Fatalf("replayguard decided %d of %d deliveries", len(rec.kept), len(feed))
	}
	return result{rate: float64(len(feed)) / took.Seconds(), cpu: cpu.Seconds() / float64(len(feed)), check: keptCheck(feed, rec.kept)}
}

// recorder notes, for each message it passes to the engine, whether it
// was applied.
type recorder struct {
	p    file.Processor
	kept []bool
}

func (r *recorder) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	ds, err := r.p.Process(ctx, msgs)
	if err == nil {
		for _, d := range ds {
			r.kept = append(r.kept, d.Outcome.Effective())
		}
	}
	return ds, err
}

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
