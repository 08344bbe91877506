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

// Submitter is a Processor that decides a batch at once and commits it
// behind the batches submitted before it (*engine.Engine is one): a
// consumer then collects and decides its next batch while this one is
// written. landed is closed once the commit is durable or failed; wait
// then tells which. When a commit fails, every batch submitted after it
// fails too, or is refused until a wait has returned the failure; each
// wait must be called (engine.Engine.SubmitLanded).
type Submitter interface {
	SubmitLanded(ctx context.Context, msgs []engine.Message) (landed <-chan struct{}, wait func() ([]engine.Decision, error), err error)
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

// Decided returns how many deliveries of batch an earlier attempt
// committed a decision of (engine.Message.Decided), msg pointing at one
// delivery's message; 0 when msg is nil.
func Decided[D any](batch []D, msg func(*D) *engine.Message) int {
	n := 0
	for i := range batch {
		if msg != nil && msg(&batch[i]).Decided() {
			n++
		}
	}
	return n
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
		err := c.Commit(ctx, msgs)
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
	// failure is the error of the last attempt, when it failed.
	failure atomic.Pointer[string]
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

// Failure says why the last attempt did not commit; "" when it did.
func (c *Committer) Failure() string {
	if c.ok.Load() {
		return ""
	}
	if f := c.failure.Load(); f != nil {
		return "the last commit failed: " + *f
	}
	return "the last commit failed"
}

// NotReady says why an MQTT consumer is not ready, connected to a broker
// or not, holding its subscriptions or not (refused, when not nil, saying
// why the broker last refused them), and committing through c; "" when it
// is ready.
func NotReady(connected, subscribed bool, refused *string, c *Committer) string {
	switch {
	case !connected:
		return "not connected to a broker (mqtt.brokers)"
	case !subscribed && refused != nil:
		return "connected, and the broker refuses to renew the subscriptions (trying again): " + *refused
	case !subscribed:
		return "connected, not yet subscribed"
	}
	return c.Failure()
}

// failed notes that an attempt failed with err.
func (c *Committer) failed(err error) {
	msg := err.Error()
	c.failure.Store(&msg)
	c.ok.Store(false)
}

// Commit passes msgs to Process until it returns nil. It gives up only
// when ctx is done, with nothing committed, and returns ctx.Err().
func (c *Committer) Commit(ctx context.Context, msgs []engine.Message) error {
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
		c.failed(err)
		c.obs.Observe(source.Event{Kind: source.CommitFailed, N: len(msgs), Duration: took, Err: err})
		wait := c.retry.Delay(attempt)
		c.log.Error(c.name+" commit failed: nothing acknowledged, retrying the batch",
			"messages", len(msgs), "attempt", attempt, "retry_in", wait, "err", err)
		if !Sleep(ctx.Done(), wait) {
			return ctx.Err()
		}
	}
}

// Flight is a batch submitted and on its way to the store.
type Flight struct {
	landed chan struct{} // closed once the commit is durable or failed
	at     time.Time     // when it landed; set before landed closes
	n      int
	start  time.Time
	// wait takes the commit's outcome (Land), and kept runs when it is a
	// failure; err is the failure once taken.
	wait func() ([]engine.Decision, error)
	kept func()
	err  error
}

// Landed is closed once the batch's commit is durable or has failed.
func (f *Flight) Landed() <-chan struct{} { return f.landed }

// At is when the commit landed; valid once Landed is closed.
func (f *Flight) At() time.Time { return f.at }

// done reports whether Landed is closed.
func (f *Flight) done() bool {
	select {
	case <-f.landed:
		return true
	default:
		return false
	}
}

// Submit submits msgs when the Processor is a Submitter. It returns nil
// when it is not, or when it refused the batch at once: the batch is then
// to be passed to Commit, which retries. kept runs, when the commit failed,
// once Land has taken the failure (see Keep).
func (c *Committer) Submit(ctx context.Context, msgs []engine.Message, kept func()) *Flight {
	s, ok := c.p.(Submitter)
	if !ok {
		return nil
	}
	f := &Flight{landed: make(chan struct{}), n: len(msgs), start: time.Now(), kept: kept}
	landed, wait, err := s.SubmitLanded(ctx, msgs)
	if err != nil {
		kept()
		return nil
	}
	f.wait = wait
	select {
	case <-landed:
		// A shared store commits (or fails) before Submit returns: the
		// loop must see it landed at once, and take a failure before it
		// submits the next batch, which would otherwise be committed
		// ahead of the failed one.
		f.at = time.Now()
		close(f.landed)
	default:
		go func() {
			<-landed
			f.at = time.Now()
			close(f.landed)
		}()
	}
	return f
}

// Land waits for f's commit, takes its outcome and reports it as Commit
// reports an attempt. The outcome is taken here, by the caller, and not
// when the commit lands: until it is, the batches submitted after a failed
// one are refused, so none of them is decided on the state without it and
// committed ahead of it. On an error nothing of the batch is to be
// acknowledged: it is to be passed to Commit again, after every batch
// submitted behind it has landed too.
func (c *Committer) Land(f *Flight) error {
	<-f.landed
	if f.wait != nil {
		if _, f.err = f.wait(); f.err != nil && f.kept != nil {
			f.kept()
		}
		f.wait = nil
	}
	took := time.Since(f.start)
	if f.err == nil {
		c.obs.Observe(source.Event{Kind: source.Committed, N: f.n, Duration: took})
		if !c.ok.Swap(true) {
			c.log.Info(c.name + " commit recovered")
		}
		return nil
	}
	c.failed(f.err)
	c.obs.Observe(source.Event{Kind: source.CommitFailed, N: f.n, Duration: took, Err: f.err})
	c.log.Error(c.name+" commit failed: nothing acknowledged, committing the batch again",
		"messages", f.n, "err", f.err)
	return f.err
}

// SubmitMessages returns a Batches.Submit that submits each batch's engine
// messages (msg points at one delivery's) through c.
func SubmitMessages[D any](c *Committer, msg func(*D) *engine.Message) func(context.Context, []D) *Flight {
	return func(ctx context.Context, batch []D) *Flight {
		msgs := Messages(batch, msg)
		return c.Submit(ctx, msgs, func() { Keep(batch, msgs, msg) })
	}
}
