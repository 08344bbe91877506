package app

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source/mqtt"
)

// FeedProcessor is one feed's processor (FeedProcessors): it names its
// feed on each delivery and passes the batch on, counting what the feed's
// deliveries were decided.
type FeedProcessor struct {
	name string
	one  *oneAtATime
	// deliveries counts the deliveries committed, once each (a batch that
	// failed is counted when it is passed again and commits); first and
	// duplicates their decisions.
	deliveries, first, duplicates atomic.Uint64
	// again counts the twins applied again: their key had left the key
	// window when they came, after the other feed's copy was applied.
	again  atomic.Uint64
	behind atomic.Int64 // nanoseconds: the last twin's delay behind the other feed's copy
}

// FeedProcessors returns one processor per feed of names, all passing
// their batches to p one at a time: each feed's consumer calls its own
// from its own goroutine, and p's calls must not overlap. behind, when not
// nil, is told how long after the other feed's copy each twin arrived;
// again, when not nil, of each twin applied again (AppliedAgain), with the
// feed whose copy was applied first.
func FeedProcessors(p mqtt.Processor, names []string, behind func(feed string, d time.Duration), again func(feed, first string, d time.Duration)) []*FeedProcessor {
	one := &oneAtATime{p: p, firsts: newArrivals(recentArrivals), behind: behind, again: again}
	out := make([]*FeedProcessor, len(names))
	for i, name := range names {
		out[i] = &FeedProcessor{name: name, one: one}
	}
	return out
}

// Process names the feed on msgs and passes them on.
func (f *FeedProcessor) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	for i := range msgs {
		msgs[i].Feed = f.name
	}
	ds, err := f.one.Process(ctx, f, msgs)
	if err != nil {
		return ds, err
	}
	f.count(ds)
	return ds, nil
}

// submitter is a processor that decides a batch at once and commits it
// behind the batches submitted before it (*engine.Engine, see
// engine.Engine.SubmitLanded).
type submitter interface {
	SubmitLanded(ctx context.Context, msgs []engine.Message) (landed <-chan struct{}, wait func() ([]engine.Decision, error), err error)
}

// SubmittingFeed is a FeedProcessor with SubmitLanded: its feed's
// consumer decides the next batch while one commits.
type SubmittingFeed struct{ *FeedProcessor }

// Submitting returns f with SubmitLanded, or nil when the processor it passes
// its batches to has none. Each feed's batches commit in the order its
// consumer submits them; the feeds' batches in the order they reach the
// engine. A commit that fails fails every batch submitted after it, from
// either feed, and each feed's consumer commits its own again.
func (f *FeedProcessor) Submitting() *SubmittingFeed {
	if _, ok := f.one.p.(submitter); !ok {
		return nil
	}
	return &SubmittingFeed{f}
}

// SubmitLanded names the feed on msgs and submits them; landed is closed
// once their commit is durable or failed, and wait returns their
// decisions, or the failure.
func (s *SubmittingFeed) SubmitLanded(ctx context.Context, msgs []engine.Message) (<-chan struct{}, func() ([]engine.Decision, error), error) {
	f := s.FeedProcessor
	for i := range msgs {
		msgs[i].Feed = f.name
	}
	return f.one.submit(ctx, f, msgs)
}

// count counts a committed batch's decisions.
func (f *FeedProcessor) count(ds []engine.Decision) {
	var first, dups uint64
	for _, d := range ds {
		switch {
		case d.Outcome.Effective():
			first++
		case d.Outcome == engine.Duplicate:
			dups++
		}
	}
	f.deliveries.Add(uint64(len(ds)))
	f.first.Add(first)
	f.duplicates.Add(dups)
}

// Prepare decodes ahead of Process when the processor can: each feed's
// consumer calls it on its own goroutine.
func (f *FeedProcessor) Prepare(msgs []engine.Message) {
	for i := range msgs {
		msgs[i].Feed = f.name
	}
	if p, ok := f.one.p.(interface{ Prepare([]engine.Message) }); ok {
		p.Prepare(msgs)
	}
}

// Counts returns the deliveries committed, those decided first (applied
// or applied late) and those decided duplicate.
func (f *FeedProcessor) Counts() (deliveries, first, duplicates uint64) {
	return f.deliveries.Load(), f.first.Load(), f.duplicates.Load()
}

// AppliedAgain counts the twins this feed delivered that were applied
// although the other feed's copy was applied before: their key had left
// the key window (window.ttl, window.max_entries) when they came. Only a
// twin whose first copy is among the last recentArrivals applied is seen.
func (f *FeedProcessor) AppliedAgain() uint64 { return f.again.Load() }

// Behind is how long after the other feed's copy the last twin this feed
// delivered arrived; 0 before any.
func (f *FeedProcessor) Behind() time.Duration { return time.Duration(f.behind.Load()) }

// recentArrivals bounds the keys whose first arrival a twin is timed
// against: a twin that comes later than that many messages after its first
// copy is not timed.
const recentArrivals = 1 << 16

// arrivals remembers which feed delivered each recent key first, and when.
type arrivals struct {
	at   map[engine.Hash]arrival
	ring []engine.Hash // insertion order, for eviction
	next int
}

type arrival struct {
	feed *FeedProcessor
	at   time.Time
	slot int // its place in ring: a key added again has a newer one
}

func newArrivals(n int) *arrivals {
	return &arrivals{at: make(map[engine.Hash]arrival, n), ring: make([]engine.Hash, n)}
}

func (a *arrivals) add(key engine.Hash, x arrival) {
	if old := a.ring[a.next]; !old.IsZero() && a.at[old].slot == a.next {
		delete(a.at, old)
	}
	a.ring[a.next] = key
	x.slot = a.next
	a.at[key] = x
	a.next = (a.next + 1) % len(a.ring)
}
