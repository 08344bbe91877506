package main

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/benchfeed"
)

// The in-memory rows run on one core (GOMAXPROCS 1) and time only the
// deciding: every message is built before the timer starts.

// oneCore runs f with GOMAXPROCS 1 and adds the CPU time the process spent
// in it per delivery: unlike the rate, it hardly depends on what else the
// machine runs.
func oneCore(messages int, f func() result) result {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	before := cpuTime(syscall.RUSAGE_SELF)
	r := f()
	r.cpu = (cpuTime(syscall.RUSAGE_SELF) - before).Seconds() / float64(messages)
	return r
}

// cpuTime is the user and system time of the process (RUSAGE_SELF) or of
// its waited-for children (RUSAGE_CHILDREN).
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// decideReplayguard gives the feed to the engine on the in-memory store,
// in batches of 1000: decode (validation and field extraction in one pass),
// key and content digest, the decision, the audit record with its hash
// chain, and the store's in-memory commit.
func decideReplayguard(h *harness, feed []benchfeed.Message) result {
	cfg, err := config.Parse([]byte(strings.Replace(benchfeed.Route, "store: {kind: embedded, path: %q}", "store: {kind: memory}", 1)), "(bench)", nil)
	if err != nil {
		h.Fatal(err)
	}
	a, err := app.Open(context.Background(), cfg, app.Options{})
	if err != nil {
		h.Fatal(err)
	}
	defer a.Close()
	msgs := make([]engine.Message, len(feed))
	for i := range feed {
		msgs[i] = engine.Message{Topic: feed[i].Topic, Payload: feed[i].Payload, Broker: "bench"}
	}
	kept := make([]bool, 0, len(feed))
	return oneCore(len(feed), func() result {
		start := time.Now()
		for lo := 0; lo < len(msgs); lo += 1000 {
			ds, err := a.Engine.Process(context.Background(), msgs[lo:min(lo+1000, len(msgs))])
			if err != nil {
				h.Fatal(err)
			}
			for _, d := range ds {
				kept = append(kept, d.Outcome.Effective())
			}
		}
		took := time.Since(start)
		return result{rate: float64(len(feed)) / took.Seconds(), check: keptCheck(feed, kept)}
	})
}

// keyMetadata is the metadata field that carries the idempotency key to
// Watermill's deduplicator, as a producer would set it.
const keyMetadata = "idempotency_key"

// decideWatermill runs Watermill's Deduplicator middleware, with its
// default in-memory repository (a map under a mutex, one minute window), in
// front of a handler that only notes it was called. byKey keys it on the
// metadata field (no payload parse); otherwise it uses its default key,
// an Adler-32 checksum of the payload.
func decideWatermill(h *harness, feed []benchfeed.Message, byKey bool) result {
	d := &middleware.Deduplicator{}
	if byKey {
		d.KeyFactory = middleware.NewMessageHasherFromMetadataField(keyMetadata)
	}
	var called bool
	handle := d.Middleware(func(*message.Message) ([]*message.Message, error) { called = true; return nil, nil })
	msgs := make([]*message.Message, len(feed))
	for i := range feed {
		msgs[i] = message.NewMessage(strconv.Itoa(i), feed[i].Payload)
		msgs[i].Metadata.Set(keyMetadata, feed[i].Key())
	}
	kept := make([]bool, len(feed))
	return oneCore(len(feed), func() result {
		start := time.Now()
		for i, m := range msgs {
			called = false
			if _, err := handle(m); err != nil {
				h.Fatalf("message %d: %v", i, err)
			}
			kept[i] = called
		}
		took := time.Since(start)
		return result{rate: float64(len(feed)) / took.Seconds(), check: keptCheck(feed, kept)}
	})
}
