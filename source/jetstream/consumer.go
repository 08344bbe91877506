package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// Processor decides and durably commits batches. *engine.Engine implements
// it. Process decides and durably commits a batch; nil means every message
// has a durable decision. On error nothing was committed; the same batch
// may be passed again. Calls never overlap.
type Processor = consume.Processor

// preparer is a Processor that can decode messages ahead of Process (see
// consume.Preparer).
type preparer = consume.Preparer

// decider is a Processor that tells what its store holds, as the engine
// does (engine.Engine.Stats): whether it has decided anything yet.
type decider interface{ Stats() engine.Stats }

// groupDecider is a decider that tells whether its store holds decisions
// of any member of its group (engine.Engine.HoldsDecisions).
type groupDecider interface {
	HoldsDecisions(ctx context.Context) (bool, error)
}

// apiTimeout bounds one JetStream API request (stream info, consumer
// create) while binding.
const apiTimeout = 10 * time.Second

// Consumer consumes a JetStream stream through a durable pull consumer into
// a Processor, and acknowledges each message after its batch is committed,
// in delivery order.
type Consumer struct {
	cfg  Config
	p    Processor
	prep preparer // p, when it can decode ahead; else nil
	dec  decider  // p, when it tells its store's state; else nil
	log  *slog.Logger
	obs  source.Observer

	running   atomic.Bool
	connected atomic.Bool
	closing   atomic.Bool // Run closes the connection: its loss is no fault
	bound     atomic.Bool
	commits   *consume.Committer
	holding   *holding               // the messages Run holds
	server    atomic.Pointer[string] // URL of the server connected to
	// accounted is the last stream sequence accounted for: every one up
	// to it was received, or told lost (see account); Run's.
	accounted uint64
	// receipts is what this bind received (see account).
	receipts receipts
	// owed is what the server had delivered before this bind and not
	// seen acknowledged (see owed).
	owed owed
	// verified is the last delivery (consumer sequence) known to have
	// come here or told of; lastReading is the last check's reading, told of at
	// the next one. Run's.
	verified    uint64
	lastReading *reading
	// deliveredBefore is the consumer's delivered stream sequence at the
	// bind: what the server delivered up to it went to an earlier process
	// (or this one's earlier bind), which may have decided a message and
	// stopped before its acknowledgement. Run's.
	deliveredBefore uint64
	// ackFloor is the consumer's ack floor as the server last told it (at
	// the bind, a check, a reconnect), and when: every message up to it
	// was acknowledged, so decided, and every one after it was decided
	// since, if at all. Where to resume a consumer deleted.
	ackFloor atomic.Pointer[floor]
	// js and streamCreated are the bind's JetStream API and the creation
	// time of the stream it found: a stream of that name created at
	// another time is another stream, whose sequences started over. Set
	// before Run's goroutines start.
	js            jetstream.JetStream
	streamCreated time.Time
	// startFloor is the stream sequence before the consumer's own start
	// (startBefore), read at the bind: where it was made to start, it
	// delivers nothing before. Set before Run's goroutines start.
	startFloor uint64
	// unbound is why the last attempt to bind failed; nil once bound.
	unbound atomic.Pointer[string]
	// end is the highest stream sequence the server has shown the stream
	// to hold; streamWent says how the stream went, once deleted() found
	// it gone with the consumer (tellGone).
	end        streamEnd
	streamWent atomic.Pointer[string]
	// gaveUpDenied: the server refused this connection's user the
	// subscription to the advisory of the messages it gives up on
	// (deniedGaveUp).
	gaveUpDenied atomic.Bool
}

// floor is an ack floor and when it was read.
type floor struct {
	seq uint64
	at  time.Time
}

// noteFloor records the consumer's ack floor, read now.
// The floor is never below the consumer's own start (startFloor): a
// durable made to start at a sequence has an ack floor of 0 on
// nats-server 2.9 until its first acknowledgement, and resuming it from
// the stream's first message would deliver again what was decided before
// its start.
func (c *Consumer) noteFloor(info *jetstream.ConsumerInfo) {
	c.ackFloor.Store(&floor{seq: max(info.AckFloor.Stream, c.startFloor), at: time.Now().UTC()})
}

// delivery is one message in hand, with what its ack needs.
type delivery struct {
	msg       engine.Message
	js        acker
	at        time.Time
	delivered uint64 // how often the server delivered it, this time included
	streamSeq uint64
}

// New returns a Consumer of the stream in cfg for p, or an error wrapping
// ErrConfig. It does not connect yet.
func New(cfg Config, p Processor) (*Consumer, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil processor", ErrConfig)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, p: p, log: cfg.Logger, obs: cfg.Observer}
	c.prep, _ = p.(preparer)
	c.dec, _ = p.(decider)
	c.commits = consume.NewCommitter("jetstream", p, consume.Backoff{Min: cfg.CommitRetryMin, Max: cfg.CommitRetryMax}, cfg.Observer, cfg.Logger)
	return c, nil
}

// Ready reports whether the consumer is connected, bound to its durable
// consumer, and its last commit succeeded.
func (c *Consumer) Ready() bool {
	return c.connected.Load() && c.bound.Load() && c.commits.OK()
}

// NotReady says why Ready is false; "" when it is true.
func (c *Consumer) NotReady() string {
	switch {
	case !c.connected.Load():
		return "not connected to the NATS server (jetstream.url)"
	case !c.bound.Load():
		if why := c.unbound.Load(); why != nil {
			return "connected, not yet bound to its durable consumer: " + *why
		}
		return "connected, not yet bound to its durable consumer"
	}
	return c.commits.Failure()
}

// Warning says what the consumer cannot do while it is ready, for
// /readyz; "" when nothing. It names the advisory subject the server
// refuses this connection's user (deniedGaveUp).
func (c *Consumer) Warning() string {
	if !c.gaveUpDenied.Load() {
		return ""
	}
	return gaveUpDeniedText(c.cfg.Stream, c.cfg.Consumer)
}

// Run consumes until ctx is done, then stops pulling, commits and
// acknowledges the messages in hand, flushes the acks to the server (all
// within ShutdownTimeout) and returns nil. It returns early with an error
// wrapping ErrStream when the stream is missing or the consumer refused,
// and ErrConsumerDeleted when the consumer is deleted while Run consumes.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer c.running.Store(false)
	nc, err := c.connect()
	if err != nil {
		return err
	}
	c.closing.Store(false)
	c.gaveUpDenied.Store(false)
	c.streamWent.Store(nil)
	defer func() {
		c.closing.Store(true)
		nc.Close()
		c.connected.Store(false)
	}()
	cons, subjects, err := c.bind(ctx, nc)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer c.bound.Store(false)
	pull, err := newPuller(nc, c.cfg.Stream, c.cfg.Consumer, c.cfg.MaxAckPending)
	if err != nil {
		return fmt.Errorf("jetstream: pull from consumer %q: %w", c.cfg.Consumer, err)
	}
	gave, stopGaveUp, err := listenGaveUp(nc, c.cfg.Stream, c.cfg.Consumer)
	if err != nil {
		return fmt.Errorf("jetstream: listen for the messages the server gives up on: %w", err)
	}
	defer stopGaveUp()
	c.checkGaveUp(ctx, nc)
	in := make(chan delivery, c.cfg.MaxAckPending)
	fatal := make(chan error, 1)
	rctx, stopReceiving := context.WithCancel(context.WithoutCancel(ctx))
	kctx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	c.holding = newHolding(c.cfg.AckWait)
	endPull := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.receive(rctx, cons, pull, gave, endPull, in, fatal) })
	wg.Go(func() { c.holding.keep(kctx) })
	wg.Go(func() { c.watch(kctx, nc, cons, subjects) })

	inHand, committed, runErr := c.consume(ctx, in, fatal)

	close(endPull) // the messages the server sent already still come through in
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ShutdownTimeout)
	defer cancel()
	left := c.drain(drainCtx, inHand, committed, in)
	stopReceiving()
	stopKeeping()
	wg.Wait()
	stopGaveUp()
	c.tellTakenLeft(leftGaveUp(gave))
	for d := range in {
		left = append(left, d)
	}
	if len(left) > 0 && nc.IsConnected() {
		c.endPull(context.WithoutCancel(ctx), nc, cons)
	}
	c.tellGone(left)
	c.abandon(left)
	c.flushAcks(drainCtx, nc)
	c.markStop(drainCtx, cons)
	return runErr
}

// flushAcks waits, until ctx is done, for the acks sent so far to reach
// the server. While the connection is down, nats.go holds them for the
// next one: Run waits for it only if there is something to send.
func (c *Consumer) flushAcks(ctx context.Context, nc *nats.Conn) {
	if !nc.IsConnected() {
		if n, err := nc.Buffered(); err != nil || n == 0 {
			return
		}
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		c.log.Warn("jetstream stopping: acks may not have reached the server; it will deliver those messages again, found duplicate", "err", err)
	}
}

// endPull makes sure that the server holds no pull request of this
// consumer's before the messages left are negatively acknowledged. Else
// nats-server 2.9 (seen with 2.9.10) hands the first message Nak'd to the
// pull request nobody reads any more: it comes back, to any consumer, only
// after AckWait, and the last message delivered is delivered once more.
// The unsubscription of the pull's inbox reaches the server first (the
// flush), then a consumer info request makes it drop the pull requests of
// an inbox that has gone.
func (c *Consumer) endPull(ctx context.Context, nc *nats.Conn, cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if err := nc.FlushWithContext(ctx); err != nil {
		return
	}
	if _, err := cons.Info(ctx); err != nil {
		c.log.Warn("jetstream stopping: the server may deliver a message left to this consumer's ended pull, and again only after ack_wait", "err", err)
	}
}

// gone asks the server, after a missed heartbeat or a pull request it
// refused, whether the consumer still exists: one deleted while the
// connection was down (a server restarted without it, a stream deleted and
// created again) sends no notice, and its pulls only go unanswered. It returns the error that
// ends Run, or nil when the consumer exists or the server cannot tell.
// Where it exists, what the server holds unacknowledged beyond held, the
// messages Run holds, is told (noteUnheld).
func (c *Consumer) gone(ctx context.Context, cons jetstream.Consumer, held int) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	info, err := cons.Info(ctx)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return c.deleted(ctx, err.Error())
	}
	if err == nil {
		c.noteFloor(info)
		c.noteUnheld(info, held)
	}
	return nil
}

// deleted is the error that ends Run when the consumer is deleted on the
// server, saying why (the server's words) and how to resume: a new
// consumer would deliver the stream from its first message, where an id
// route's messages whose keys have left the window (window.ttl) would
// apply again, so the next start refuses to create one on a store that
// holds decisions. Where the stream went with it (deleted, or deleted and
// created again), the ack floor is a sequence of a stream that is gone:
// one created anew numbers its messages from 1 again, and a consumer made
// to start after that floor would pass over its first messages, never
// delivered and never told lost; so it is to start from the first one.
func (c *Consumer) deleted(ctx context.Context, why string) error {
	f := c.ackFloor.Load()
	if f == nil {
		f = &floor{at: time.Now().UTC()}
	}
	from := f.seq + 1
	if gone := c.streamGone(ctx); gone != "" {
		c.streamWent.Store(&gone)
		return fmt.Errorf("%w: %q on stream %q: %s; %s, so the consumer's position went with it. "+
			"The next start refuses until the consumer exists: once the stream does, create the consumer from its first message, "+
			"e.g. nats consumer add %s %s --pull --ack explicit --deliver all "+
			"(what was decided of it before is found duplicate while its keys are in the window, window.ttl; "+
			"only a stream restored from a backup of the one deleted, its sequences kept, is resumed after the ack floor read at %s, from stream sequence %d)",
			ErrConsumerDeleted, c.cfg.Consumer, c.cfg.Stream, why, gone, c.cfg.Stream, c.cfg.Consumer, f.at.Format(time.RFC3339), from)
	}
	return fmt.Errorf("%w: %q on stream %q: %s; a new one would deliver the stream from its first message, "+
		"where messages whose keys have left the window (window.ttl) apply again, so the next start refuses until it exists: "+
		"to resume, create it from stream sequence %d, after the ack floor read at %s "+
		"(what was decided after it was decided since then: its copies are found duplicate while their keys are in the window, window.ttl from then), "+
		"e.g. nats consumer add %s %s --pull --ack explicit --deliver %d",
		ErrConsumerDeleted, c.cfg.Consumer, c.cfg.Stream, why, from, f.at.Format(time.RFC3339), c.cfg.Stream, c.cfg.Consumer, from)
}

// streamGone says how the stream the bind found is gone: deleted, or
// deleted and created again (another creation time); "" when it is the
// same stream, or the server cannot tell.
func (c *Consumer) streamGone(ctx context.Context) string {
	if c.js == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	st, err := c.js.Stream(ctx, c.cfg.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return "the stream was deleted too"
	case err != nil:
		return ""
	}
	if created := st.CachedInfo().Created; !created.Equal(c.streamCreated) {
		return fmt.Sprintf("the stream was deleted too, and created again at %s, its sequences starting over", created.UTC().Format(time.RFC3339))
	}
	return ""
}

// noteUnheld tells when the server counts more of the consumer's messages
// delivered and unacknowledged than the held ones this consumer holds:
// messages delivered to a connection or a process that is gone (a crash,
// a server restart), which the server delivers again only once their ack_wait has
// run out, or messages another member holds. The server delivers no more
// than max_ack_pending of them meanwhile: at that bound, the feed waits,
// and it warns.
func (c *Consumer) noteUnheld(info *jetstream.ConsumerInfo, held int) {
	unheld := info.NumAckPending - held
	if unheld <= 0 {
		return
	}
	msg := "jetstream: the server holds messages delivered but not acknowledged that this consumer does not hold (delivered before a crash or a server restart, or to another member); it delivers them again once jetstream.ack_wait has passed since their delivery"
	level := slog.LevelInfo // another member's, in a group, as often as not
	if info.NumAckPending >= c.cfg.MaxAckPending && info.NumPending > 0 {
		msg += ", and until then nothing more: jetstream.max_ack_pending is reached"
		level = slog.LevelWarn
	}
	c.log.Log(context.Background(), level, msg, "stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "messages", unheld,
		"ack_wait", c.cfg.AckWait, "max_ack_pending", c.cfg.MaxAckPending, "backlog", info.NumPending)
}

// held is how many of the consumer's messages Run holds: those handed on
// and those its pull's inbox holds yet.
func (c *Consumer) held(p *puller) int { return c.holding.len() + len(p.msgs) }

// delivery turns a message into the engine's form, decoded ahead when the
// processor can: here, not on the goroutine that decides and commits.
func (c *Consumer) delivery(m *nats.Msg) delivery {
	d := c.decode(m.Subject, m.Data)
	d.js, d.at = m, time.Now()
	if md, err := m.Metadata(); err == nil {
		d.delivered, d.streamSeq = md.NumDelivered, md.Sequence.Stream
		c.end.note(md.Sequence.Stream+md.NumPending, d.at.UTC())
		c.receipts.received(md.Sequence.Stream, md.Sequence.Consumer)
		c.owed.received(md.Sequence.Stream)
		d.msg.Dup = md.NumDelivered > 1 // recorded, never trusted
	}
	c.prepare(&d)
	return d
}

// decode is the delivery of a message of subject with payload data, its
// topic read from the subject (or the reason it cannot be).
func (c *Consumer) decode(subject string, data []byte) delivery {
	d := delivery{msg: engine.Message{Payload: data, Broker: c.serverURL()}}
	topic, err := SubjectToTopic(subject)
	if err != nil {
		d.msg.Topic, d.msg.Invalid = subject, err.Error()
	} else {
		d.msg.Topic = topic
	}
	return d
}
