package mqtt3

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replayguard/replayguard/internal/mqttconn"
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

// Consumer consumes MQTT 3.1.1 deliveries into a Processor and
// acknowledges each one after its batch is committed, in receive order, on
// the connection that received it.
type Consumer struct {
	cfg  Config
	p    Processor
	prep preparer // p, when it can decode ahead; else nil
	log  *slog.Logger
	obs  source.Observer
	urls []*url.URL
	q    *consume.Queue[delivery]

	// cur is the generation of the connection being made or up, 0 when
	// none: a delivery is acknowledged only while it is its own.
	cur       atomic.Uint64
	conn      atomic.Pointer[corkedConn] // of the connection up, when the consumer dialed it
	lastGen   uint64                     // the connection loop's
	needClean bool                       // the connection loop's: CleanStart not yet done in this Run
	leave     mqttconn.Leaving
	share     *consume.Leaving     // leaves the share group as Run stops
	live      atomic.Pointer[link] // the connection up, for the share group's unsubscribe
	quits     sync.WaitGroup       // the share group's quits of connections lost (consume.Leaving.Lost)

	running    atomic.Bool
	connected  atomic.Bool
	subscribed atomic.Bool            // the broker's session holds our subscriptions
	everSubbed atomic.Bool            // a subscription of this Run was granted once
	holdsAll   atomic.Bool            // every filter of this Run was granted in the broker's session
	refused    atomic.Pointer[string] // why the broker refuses to renew the subscriptions; nil when it does not
	commits    *consume.Committer
	batches    *consume.Batches[delivery]

	fatal     chan error       // a refused subscription; buffered
	beforeAck func(time.Time)  // a fault point; tests in this package set it
	adopt     consume.Adoption // an adopting Run's state (Config.Adopt)
	hold      consume.Hold     // Config.Hold
}

// New returns a Consumer of the brokers in cfg for p, or an error wrapping
// ErrConfig.
func New(cfg Config, p Processor) (*Consumer, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil processor", ErrConfig)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, p: p, log: cfg.Logger, obs: cfg.Observer, q: consume.NewQueue[delivery](),
		fatal: make(chan error, 1), beforeAck: consume.BeforeAck}
	c.prep, _ = p.(preparer)
	c.hold = consume.Hold{Why: cfg.Hold, Log: cfg.Logger}
	c.share = &consume.Leaving{Group: cfg.ShareGroup, Ask: cfg.LeaveShare, Timeout: cfg.ShutdownTimeout, Log: cfg.Logger, Filters: cfg.Filters,
		Unsubscribe: c.unsubscribeShared}
	if cfg.Adopt {
		c.share.Adopting(cfg.Adopted)
		c.adopt.Fatal, c.adopt.Err = c.fatal, ErrAdoption
	} else if slices.ContainsFunc(cfg.Filters, func(f Filter) bool { return !f.Unshared }) {
		c.share.Join, c.share.Quit = cfg.JoinShare, cfg.QuitShare // the group's subscriptions are among those subscribed
	}
	for _, b := range cfg.Brokers {
		u, _ := parseBroker(b) // checked by Validate
		c.urls = append(c.urls, u)
	}
	c.commits = consume.NewCommitter("mqtt", p, consume.Backoff{Min: cfg.CommitRetryMin, Max: cfg.CommitRetryMax}, cfg.Observer, cfg.Logger)
	c.batches = &consume.Batches[delivery]{Name: "mqtt", Queue: c.q, Size: cfg.BatchSize, Linger: cfg.BatchLinger,
		Fatal: c.fatal, Commit: consume.CommitMessages(c.commits, (*delivery).message),
		Submit: consume.SubmitMessages(c.commits, (*delivery).message), Land: c.commits.Land, BeforeAck: func(at time.Time) { c.beforeAck(at) }, Ack: c.ack, Msg: (*delivery).message, Log: cfg.Logger, Observer: cfg.Observer}
	c.batches.FatalQuiet = cfg.Adopt // Run returns why the adoption ended
	return c, nil
}

// Ready reports whether the consumer is connected, subscribed, and its last
// commit succeeded.
func (c *Consumer) Ready() bool {
	return c.connected.Load() && c.subscribed.Load() && c.commits.OK()
}

// Connected reports whether the consumer holds a connection to a broker.
func (c *Consumer) Connected() bool { return c.connected.Load() }

// NotReady says why Ready is false; "" when it is true.
func (c *Consumer) NotReady() string {
	return consume.NotReady(c.connected.Load(), c.subscribed.Load(), c.refused.Load(), c.commits)
}

// Run consumes until ctx is done, then stops receiving, commits and
// acknowledges the deliveries in hand, disconnects and waits for the broker
// to close the connection (all within ShutdownTimeout), and returns nil.
// Deliveries arriving after that point stay unacknowledged in the broker's
// session. Run returns early with an error wrapping ErrSubscribe when the
// broker refuses a subscription of its first connection. An adopting Run
// (Config.Adopt) returns as that field says.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer c.running.Store(false)
	c.q.Open()
	c.subscribed.Store(false)
	c.everSubbed.Store(false)
	c.holdsAll.Store(false)
	c.refused.Store(nil)
	c.leave.Clear()
	c.needClean = c.cfg.CleanStart && !c.cfg.Adopt
	select {
	case <-c.fatal: // left by an earlier Run
	default:
	}
	connCtx, stopConnecting := context.WithCancel(context.WithoutCancel(ctx))
	leaveCtx, connect := ctx, c.connectLoop
	if c.cfg.Adopt {
		var stop func()
		leaveCtx, stop = c.adopt.Start(ctx)
		defer stop()
		connect = c.adoptOnce
	}
	consumeCtx, stopLeaving := c.share.Context(leaveCtx)
	var wg sync.WaitGroup
	wg.Go(func() { connect(connCtx) }) // once the leaving counts the deliveries

	inHand, committed, runErr := c.batches.Consume(consumeCtx)
	stopLeaving()
	rest := c.q.Close() // stop receiving
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ShutdownTimeout)
	defer cancel()
	c.batches.Drain(drainCtx, inHand, committed, rest)
	if deadline, ok := drainCtx.Deadline(); ok {
		c.leave.Set(deadline)
	}
	stopConnecting() // the loop disconnects and waits for the broker
	wg.Wait()
	c.quits.Wait()
	c.connected.Store(false)
	if c.cfg.Adopt {
		return c.adopt.Result(runErr, c.share)
	}
	return runErr
}

// connectLoop connects, serves each connection until it drops, and
// connects again, until ctx is done. A round tries the brokers in order;
// the wait before a round is 0 after a connection that proved the link
// (a failover), and grows with flaps and failed rounds.
func (c *Consumer) connectLoop(ctx context.Context) {
	b := consume.Backoff{Min: c.cfg.ConnectRetryMin, Max: c.cfg.ConnectRetryMax}
	flaps, failed := 0, 0
	for ctx.Err() == nil {
		if wait := b.Delay(flaps + failed); wait > 0 {
			c.log.Info("mqtt waiting before reconnecting", "wait", wait, "flaps", flaps, "failed_rounds", failed, "brokers", len(c.urls))
			if !consume.Sleep(ctx.Done(), wait) {
				return
			}
		}
		// Asked as the round starts, after the wait: a hold that began
		// during it keeps the consumer off too.
		for c.hold.Held() {
			if !consume.Sleep(ctx.Done(), consume.HoldPoll) {
				return
			}
		}
		l, present := c.round(ctx)
		if l == nil {
			failed++
			continue
		}
		held, delivered := c.serve(ctx, l, present)
		failed = 0
		// MQTT 3.1.1 has no DISCONNECT from the broker, and paho does not
		// report PINGRESPs, so only deliveries and time tell what a
		// connection proved.
		if ctx.Err() == nil && consume.Proved(held, consume.StableAfter, c.cfg.ConnectRetryMin, delivered) {
			flaps = 0
		} else {
			flaps = min(flaps+1, consume.MaxFlaps)
		}
	}
}

// round tries every broker once, in order, and returns the first
// connection made, with the CONNACK's session present flag, or nil.
func (c *Consumer) round(ctx context.Context) (*link, bool) {
	for _, u := range c.urls {
		if ctx.Err() != nil {
			return nil, false
		}
		if c.needClean {
			if err := c.cleanSession(ctx, u); err != nil {
				c.log.Warn("mqtt could not discard the session (clean_start)", "broker", u.Redacted(), "err", err)
				c.obs.Observe(source.Event{Kind: source.ConnectFailed, Broker: u.Redacted(), Err: err})
				continue
			}
			c.needClean = false
		}
		l, present, err := c.connect(ctx, u)
		if err == nil {
			return l, present
		}
		c.log.Warn("mqtt connect failed", "broker", u.Redacted(), "err", err)
		c.obs.Observe(source.Event{Kind: source.ConnectFailed, Broker: u.Redacted(), Err: err})
	}
	return nil, false
}
