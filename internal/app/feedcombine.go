package app

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source/mqtt"
)

// oneAtATime passes the feeds' batches to the engine one call at a time,
// and combines into one call the batches that arrive while another is
// being committed: the twin of a message usually arrives in the other
// feed's batch at the same moment, and one commit (one fsync) then decides
// both. The first caller that finds the engine idle commits what is
// waiting, its own batch first; the callers it committed for return with
// their decisions, and one that arrived meanwhile commits next.
//
// Batches submitted (submit) bypass the combining: the engine's committer
// writes the batches that wait for it in one commit itself.
type oneAtATime struct {
	p      mqtt.Processor
	failed atomic.Pointer[error] // the last call's error; nil when it succeeded
	mu     sync.Mutex
	busy   bool
	queue  []*feedBatch
	// landing holds the batches submitted and not yet timed, in the
	// engine's order (submitMu keeps it that of the Submit calls); a batch
	// is timed once it and every one before it has landed.
	submitMu sync.Mutex
	landing  []*feedBatch
	// timeMu guards landing and firsts, which with behind times each twin
	// against its first copy.
	timeMu sync.Mutex
	firsts *arrivals
	behind func(feed string, d time.Duration)
	again  func(feed, first string, d time.Duration)
}

// feedBatch is one feed's Process call, waiting to be committed.
type feedBatch struct {
	feed *FeedProcessor
	at   time.Time // when the feed passed it: its deliveries' arrival
	ctx  context.Context
	msgs []engine.Message
	ds   []engine.Decision
	err  error
	// wake says the batch was committed (done), or that its caller is to
	// commit what waits.
	wake chan struct{}
	done bool // committed by another caller; submitted: landed
}

func (o *oneAtATime) Process(ctx context.Context, feed *FeedProcessor, msgs []engine.Message) ([]engine.Decision, error) {
	b := &feedBatch{feed: feed, at: time.Now(), ctx: ctx, msgs: msgs, wake: make(chan struct{}, 1)}
	o.mu.Lock()
	o.queue = append(o.queue, b)
	if o.busy {
		o.mu.Unlock()
		// No giving up on ctx here: the committing caller's Process
		// returns when its own context is done, and wakes this one.
		<-b.wake
		if b.done {
			return b.ds, b.err
		}
	} else {
		o.busy = true
		o.mu.Unlock()
	}
	o.mu.Lock()
	batches := o.queue
	o.queue = nil
	o.mu.Unlock()
	o.commit(batches)
	o.mu.Lock()
	if len(o.queue) > 0 {
		o.queue[0].wake <- struct{}{} // its caller commits next
	} else {
		o.busy = false
	}
	o.mu.Unlock()
	return b.ds, b.err
}

// commit decides batches in one Process call, in order, and gives each its
// decisions; the messages go back to their callers as Process left them
// (a message keeps what an earlier attempt committed of it).
func (o *oneAtATime) commit(batches []*feedBatch) {
	msgs := batches[0].msgs
	if len(batches) > 1 {
		n := 0
		for _, b := range batches {
			n += len(b.msgs)
		}
		msgs = make([]engine.Message, 0, n)
		for _, b := range batches {
			msgs = append(msgs, b.msgs...)
		}
	}
	// The call runs under a batch's context that is not done: each feed
	// stops on its own context and drains under another, and a draining
	// feed's batch combined behind a stopped feed's must not fail with it
	// (a failed commit reported, the drain held for a retry).
	ctx := batches[0].ctx
	for _, b := range batches {
		if b.ctx.Err() == nil {
			ctx = b.ctx
			break
		}
	}
	ds, err := o.p.Process(ctx, msgs)
	if err == nil {
		o.failed.Store(nil)
	} else {
		o.fail(ctx, err)
	}
	at := 0
	for _, b := range batches {
		if len(batches) > 1 {
			copy(b.msgs, msgs[at:at+len(b.msgs)])
		}
		if err == nil {
			b.ds = ds[at : at+len(b.msgs) : at+len(b.msgs)]
		}
		b.err = err
		at += len(b.msgs)
	}
	if err == nil {
		o.timeMu.Lock()
		o.time(batches)
		o.timeMu.Unlock()
	}
	for _, b := range batches[1:] {
		b.done = true
		b.wake <- struct{}{}
	}
}

// submit submits a feed's batch to the engine; wait returns its
// decisions once it has landed, and counts and times them.
func (o *oneAtATime) submit(ctx context.Context, feed *FeedProcessor, msgs []engine.Message) (<-chan struct{}, func() ([]engine.Decision, error), error) {
	b := &feedBatch{feed: feed, at: time.Now(), ctx: ctx}
	o.submitMu.Lock()
	landed, wait, err := o.p.(submitter).SubmitLanded(ctx, msgs)
	if err == nil {
		o.timeMu.Lock()
		o.landing = append(o.landing, b)
		o.timeMu.Unlock()
	}
	o.submitMu.Unlock()
	if err != nil {
		o.fail(ctx, err)
		return nil, nil, err
	}
	return landed, func() ([]engine.Decision, error) {
		ds, err := wait()
		o.land(b, ds, err)
		if err != nil {
			return nil, err
		}
		feed.count(ds)
		return ds, nil
	}, nil
}

// land marks b landed and takes every landed batch at the head of
// landing, in order: the last one's outcome is the feeds' last commit's,
// and the twins are timed in the order the engine decided them.
func (o *oneAtATime) land(b *feedBatch, ds []engine.Decision, err error) {
	o.timeMu.Lock()
	defer o.timeMu.Unlock()
	b.ds, b.err, b.done = ds, err, true
	n := 0
	for n < len(o.landing) && o.landing[n].done {
		n++
	}
	for _, l := range o.landing[:n] {
		if l.err != nil {
			o.fail(l.ctx, l.err)
		} else {
			o.failed.Store(nil)
		}
	}
	o.time(o.landing[:n])
	o.landing = slices.Delete(o.landing, 0, n)
}

// fail notes a commit's error, unless it is ctx's: a stop.
func (o *oneAtATime) fail(ctx context.Context, err error) {
	if ctx.Err() == nil {
		o.failed.Store(&err)
	}
}

// time notes the first copy of each message applied, and times each twin
// against the other feed's copy; it passes over a batch that failed. A
// twin applied (its key had left the key window) is counted as applied
// again, on its feed. Called with timeMu held.
func (o *oneAtATime) time(batches []*feedBatch) {
	for _, b := range batches {
		if b.err != nil {
			continue
		}
		for i := range b.ds {
			d := &b.ds[i]
			if d.Key.IsZero() || !d.Outcome.Effective() && d.Outcome != engine.Duplicate {
				continue
			}
			first, twin := o.firsts.at[d.Key]
			twin = twin && first.feed != b.feed
			if d.Outcome.Effective() && !twin { // a twin applied again keeps its first copy's arrival
				o.firsts.add(d.Key, arrival{feed: b.feed, at: b.at})
			}
			if !twin {
				continue
			}
			late := max(0, b.at.Sub(first.at))
			b.feed.behind.Store(int64(late))
			if o.behind != nil {
				o.behind(b.feed.name, late)
			}
			if d.Outcome.Effective() {
				b.feed.again.Add(1)
				if o.again != nil {
					o.again(b.feed.name, first.feed.name, late)
				}
			}
		}
	}
}
