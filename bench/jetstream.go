package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/benchfeed"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// The JetStream end-to-end row: each side on a fresh nats-server whose
// stream holds the feed's deliveries (replays included, in feed order, the
// MQTT rows' count) before its consumer starts; the timer runs from the
// consumer's start (connect, create the durable consumer) to its last
// delivery decided or acknowledged.

const jsStream = "INCIDENTS"

// jsSubject is the subject a delivery is published on: its topic with '.'
// for '/', which replayguard reads back as the topic.
func jsSubject(topic string) string { return strings.ReplaceAll(topic, "/", ".") }

// fillStream creates the stream on srv and publishes the feed into it,
// every message acknowledged before it returns.
func fillStream(h *harness, srv *natsServer, feed []benchfeed.Message) {
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
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: jsStream, Subjects: []string{"incidents.>"},
		Storage: jetstream.FileStorage}); err != nil {
		h.Fatal(err)
	}
	for i := range feed {
		if _, err := js.PublishAsync(jsSubject(feed[i].Topic), feed[i].Payload); err != nil {
			h.Fatalf("publish %d: %v", i, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		h.Fatalf("JetStream: %d publishes unacknowledged", js.PublishAsyncPending())
	}
}

// jsNoop measures a no-op durable pull consumer of nats.go's jetstream
// package: explicit acks, the same MaxAckPending as replayguard's default,
// each message acknowledged as it arrives (Ack, no round trip), nothing
// else done.
func jsNoop(h *harness, feed []benchfeed.Message) result {
	srv := startNATS(h)
	fillStream(h, srv, feed)
	cpu := cpuTime(syscall.RUSAGE_SELF) + srv.cpuTime(h)
	start := time.Now()
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
	cons, err := js.CreateOrUpdateConsumer(ctx, jsStream, jetstream.ConsumerConfig{Durable: "noop",
		AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: config.DefaultMaxAckPending})
	if err != nil {
		h.Fatal(err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(config.DefaultMaxAckPending))
	if err != nil {
		h.Fatal(err)
	}
	defer iter.Stop()
	// A redelivery counts as a delivery but not as a message of the
	// stream: the check, after the timer, is on the distinct stream
	// sequences acknowledged.
	n, got := 0, make([]jetstream.Msg, 0, len(feed))
	for n < len(feed) {
		m, err := iter.Next(jetstream.NextContext(ctx))
		if err != nil {
			h.Fatalf("no-op consumer after %d messages: %v", n, err)
		}
		if err := m.Ack(); err != nil {
			h.Fatal(err)
		}
		got = append(got, m)
		n++
	}
	if err := nc.Flush(); err != nil { // the acks reached the server
		h.Fatal(err)
	}
	took := time.Since(start)
	cpu = cpuTime(syscall.RUSAGE_SELF) + srv.cpuTime(h) - cpu
	seen := make(map[uint64]struct{}, len(got))
	for _, m := range got {
		meta, err := m.Metadata()
		if err != nil {
			h.Fatal(err)
		}
		seen[meta.Sequence.Stream] = struct{}{}
	}
	return result{rate: float64(n) / took.Seconds(), cpu: cpu.Seconds() / float64(n), check: check{messages: len(feed), kept: len(seen)}}
}

// jsReplayguard measures `replayguard run` (app.Run, in this process) with
// input jetstream, its defaults, on a durable embedded store.
func jsReplayguard(h *harness, feed []benchfeed.Message) result {
	srv := startNATS(h)
	fillStream(h, srv, feed)
	d := newJSDaemon(h, srv.URL())
	cpu := cpuTime(syscall.RUSAGE_SELF) + srv.cpuTime(h)
	start := time.Now()
	d.start(h)
	for deadline := time.Now().Add(5 * time.Minute); d.position(h) < int64(len(feed)); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			h.Fatalf("replayguard run decided %d of %d deliveries in 5 min", d.position(h), len(feed))
		}
	}
	took := time.Since(start)
	cpu = cpuTime(syscall.RUSAGE_SELF) + srv.cpuTime(h) - cpu
	applied := d.applied(h)
	d.stop(h)
	return result{rate: float64(len(feed)) / took.Seconds(), cpu: cpu.Seconds() / float64(len(feed)),
		check: countCheck(len(feed), benchfeed.Unique(feed), applied)}
}

func newJSDaemon(h *harness, url string) *daemon {
	listen := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(h))
	text := fmt.Sprintf(benchfeed.Route, filepath.Join(h.TempDir(), "data")) +
		fmt.Sprintf("input: jetstream\njetstream: {url: %q, stream: %s, consumer: replayguard}\nhttp: {listen: %q}\n",
			url, jsStream, listen)
	cfg, err := config.Parse([]byte(text), "(bench)", nil)
	if err != nil {
		h.Fatalf("configuration:\n%s\n%v", text, err)
	}
	d := &daemon{cfg: cfg, client: &http.Client{Timeout: 5 * time.Second}}
	h.Cleanup(func() {
		if d.cancel != nil {
			d.cancel()
			<-d.done
		}
		d.client.CloseIdleConnections()
	})
	return d
}
