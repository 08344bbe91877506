package consume

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
)

// Processor decides and durably commits batches. *engine.Engine implements it.
type Processor interface {
	// Process decides and durably commits a batch; nil means every message
	// has a durable decision. On error none of the batch is to be
	// acknowledged, and the same batch (the same messages) is passed
	// again: what was committed of it is not decided twice (see
	// engine.Engine.Process). Calls never overlap.
	Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error)
}

// Preparer is a Processor that can decode messages ahead of Process, on
// another goroutine (*engine.Engine can). Prepare must be safe for
// concurrent use with Process.
type Preparer interface {
	Prepare(msgs []engine.Message)
}

// Messages returns the engine message of each delivery of batch (msg
// points at one delivery's), in order: what a source passes to Commit.
func Messages[D any](batch []D, msg func(*D) *engine.Message) []engine.Message {
	msgs := make([]engine.Message, len(batch))
	for i := range batch {
		msgs[i] = *msg(&batch[i])
	}
	return msgs
}

// Keep writes msgs, taken from batch by Messages, back into its
// deliveries after a Commit that did not commit them: an attempt may have
// committed part of the batch (a shared store commits the deliveries
// whose rows another member holds in a batch of their own), which the
// engine notes in the messages, and the batch passed again, by the drain
// at a stop, must carry that so as not to decide that part twice
// (Processor).
func Keep[D any](batch []D, msgs []engine.Message, msg func(*D) *engine.Message) {
	for i := range batch {
		*msg(&batch[i]) = msgs[i]
	}
}

// CommitMessages returns a Batches.Commit that commits each batch's engine
// messages (msg points at one delivery's) through c, with no call between
// attempts.
func CommitMessages[D any](c *Committer, msg func(*D) *engine.Message) func(context.Context, []D) error {
	return func(ctx context.Context, batch []D) error {
		msgs := Messages(batch, msg)
		err := c.Commit(ctx, msgs, nil)
		if err != nil {
			Keep(batch, msgs, msg)
		}
		return err
	}
}

// Committer passes each batch to a Processor until it commits, waiting a
// jittered, growing delay between attempts, and remembers whether the last
// attempt succeeded (a consumer is not ready while it failed). Commit is
// called from one goroutine at a time; OK from any.
type Committer struct {
	p     Processor
	retry Backoff
	obs   source.Observer
	log   *slog.Logger
	name  string // the source's name, first word of its log messages
	ok    atomic.Bool
}

// NewCommitter returns a Committer of batches to p that waits as retry
// says between attempts, tells obs of every attempt, and logs on log with
// messages that start with name ("mqtt", "jetstream").
func NewCommitter(name string, p Processor, retry Backoff, obs source.Observer, log *slog.Logger) *Committer {
	c := &Committer{p: p, retry: retry, obs: obs, log: log, name: name}
	c.ok.Store(true)
	return c
}

// OK reports whether the last attempt committed (true before the first).
func (c *Committer) OK() bool { return c.ok.Load() }

// Commit passes msgs to Process until it returns nil. It gives up only
// when ctx is done, with nothing committed, and returns ctx.Err(). Before
// each wait between attempts it calls retrying, when not nil (JetStream
// tells the server there that the batch is still being worked on).
func (c *Committer) Commit(ctx context.Context, msgs []engine.Message, retrying func()) error {
	for attempt := 1; ; attempt++ {
		start := time.Now()
		_, err := c.p.Process(ctx, msgs)
		took := time.Since(start)
		if err == nil {
			c.obs.Observe(source.Event{Kind: source.Committed, N: len(msgs), Duration: took})
			if !c.ok.Swap(true) {
				c.log.Info(c.name+" commit recovered", "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err() // shutting down: the drain tries again
		}
		c.ok.Store(false)
		c.obs.Observe(source.Event{Kind: source.CommitFailed, N: len(msgs), Duration: took, Err: err})
		wait := c.retry.Delay(attempt)
		c.log.Error(c.name+" commit failed: nothing acknowledged, retrying the batch",
			"messages", len(msgs), "attempt", attempt, "retry_in", wait, "err", err)
		if retrying != nil {
			retrying()
		}
		if !Sleep(ctx.Done(), wait) {
			return ctx.Err()
		}
	}
}
