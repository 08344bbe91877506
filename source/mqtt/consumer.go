package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session/state"

	"github.com/replayguard/replayguard/engine"
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

// sessionTakenOver is the DISCONNECT reason code of a broker that let
// another connection take this client id.
const sessionTakenOver = 0x8E

// unsupportedProtocolVersion is the CONNACK reason code of a broker that
// does not speak MQTT 5.
const unsupportedProtocolVersion = 0x84

// Consumer consumes MQTT deliveries into a Processor and acknowledges each
// one after its batch is committed, in receive order.
type Consumer struct {
	cfg        Config
	p          Processor
	prep       preparer // p, when it can decode ahead; else nil
	log        *slog.Logger
	obs        source.Observer
	urls       []*url.URL
	reconnects *reconnects
	stall      *stallPinger
	q          *consume.Queue[delivery]
	gate       *ackGate         // sends the acknowledgements; one per Run
	leave      mqttconn.Leaving // set as Run disconnects
	share      *consume.Leaving // leaves the share group as Run stops
	adopt      adoption         // an adopting Run's state (Config.Adopt)
	hold       consume.Hold     // Config.Hold
	// heldAt is the last attempt (autopaho's count of rounds since the
	// connection was lost) whose round the hold kept off: rounds held are
	// no failed rounds, and do not grow the wait after the hold.
	heldAt atomic.Int64

	running    atomic.Bool
	connected  atomic.Bool
	subscribed atomic.Bool            // the broker's session holds our subscriptions
	stamped    atomic.Uint64          // the last connection generation whose first delivery carries its time
	everSubbed atomic.Bool            // a subscription of this Run was granted once
	refused    atomic.Pointer[string] // why the broker last refused the subscriptions after their first grant; nil once granted
	commits    *consume.Committer
	batches    *consume.Batches[delivery]
	broker     atomic.Pointer[string] // URL of the connection being made or up

	fatal chan error     // a refused subscription; buffered
	wg    sync.WaitGroup // subscribe goroutines
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
	c := &Consumer{
		cfg:        cfg,
		p:          p,
		log:        cfg.Logger,
		obs:        cfg.Observer,
		reconnects: &reconnects{b: consume.Backoff{Min: cfg.ConnectRetryMin, Max: cfg.ConnectRetryMax}, stableAfter: consume.StableAfter},
		q:          consume.NewQueue[delivery](),
		fatal:      make(chan error, 1),
	}
	c.prep, _ = p.(preparer)
	c.hold = consume.Hold{Why: cfg.Hold, Log: cfg.Logger}
	c.share = &consume.Leaving{Group: cfg.ShareGroup, Ask: cfg.LeaveShare, Timeout: cfg.ShutdownTimeout, Log: cfg.Logger, Filters: cfg.Filters}
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
	c.stall = newStallPinger(func(err error) {
		c.log.Warn("mqtt connection stalled: reconnecting", "broker", c.brokerURL(), "err", err)
		c.obs.Observe(source.Event{Kind: source.Stalled, Broker: c.brokerURL(), Err: err})
	}, c.reconnects.traffic)
	c.commits = consume.NewCommitter("mqtt", p, consume.Backoff{Min: cfg.CommitRetryMin, Max: cfg.CommitRetryMax}, cfg.Observer, cfg.Logger)
	c.batches = &consume.Batches[delivery]{Name: "mqtt", Queue: c.q, Size: cfg.BatchSize, Linger: cfg.BatchLinger,
		Fatal: c.fatal, Commit: consume.CommitMessages(c.commits, (*delivery).message),
		Submit: consume.SubmitMessages(c.commits, (*delivery).message), Land: c.commits.Land, BeforeAck: consume.BeforeAck, Ack: c.ack, Msg: (*delivery).message, Log: cfg.Logger, Observer: cfg.Observer}
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

// Run consumes until ctx is done, then, in a share group, leaves it when
// Config.LeaveShare grants it, deciding what the session still delivers;
// then it stops receiving, commits and acknowledges the deliveries in
// hand, disconnects and waits for the broker to close the connection (all
// within ShutdownTimeout), and returns nil:
// on a TCP or TLS broker, the broker has then read every acknowledgement,
// so a consumer started again under the same client id is not sent the
// acknowledged messages again. Deliveries arriving after that point stay
// unacknowledged in the broker's session. Run returns early with an error
// wrapping ErrSubscribe when the broker refuses a subscription.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer c.running.Store(false)
	c.q.Open()
	c.subscribed.Store(false) // subscribe on the first connection
	c.everSubbed.Store(false)
	c.refused.Store(nil)
	select {
	case <-c.fatal: // left by an earlier Run
	default:
	}

	c.gate = newAckGate(state.NewInMemory())
	// Noted here, not in OnServerDisconnect: autopaho reports the connection
	// down before it calls that, and the reason must count for this drop.
	c.gate.onDisconnect = func(reason byte) {
		if reason == sessionTakenOver {
			c.adopt.takenOver.Store(true)
		}
		if asksBackoff(reason) {
			c.reconnects.refusedBy()
		}
	}
	c.leave.Clear()
	c.reconnects.reset() // autopaho reports no drop of the last Run's connection
	c.heldAt.Store(0)
	subCtx, stopSubscribing := context.WithCancel(context.WithoutCancel(ctx))
	cm, err := autopaho.NewConnection(context.WithoutCancel(ctx), c.clientConfig(subCtx))
	if err != nil {
		stopSubscribing()
		return fmt.Errorf("mqtt: %w", err)
	}
	c.share.Unsubscribe = func(ctx context.Context) error { return c.unsubscribeShared(ctx, cm) }
	if c.cfg.Adopt {
		var stop func()
		ctx, stop = c.startAdoption(ctx)
		defer stop()
	}
	consumeCtx, stopLeaving := c.share.Context(ctx)
	inHand, committed, runErr := c.batches.Consume(consumeCtx)
	stopLeaving()

	rest := c.q.Close() // stop receiving
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ShutdownTimeout)
	defer cancel()
	c.batches.Drain(drainCtx, inHand, committed, rest)
	// Disconnect cancels at once; the wait is for paho's goroutines, and
	// for the broker to read the acknowledgements (mqttconn.Conn.Close).
	if deadline, ok := drainCtx.Deadline(); ok {
		c.leave.Set(deadline)
	}
	if err := cm.Disconnect(context.WithoutCancel(ctx)); err != nil {
		c.log.Warn("mqtt disconnect", "err", err)
	}
	stopSubscribing()
	c.wg.Wait()
	_ = c.gate.Close()
	// autopaho reports no connection down after Disconnect: the observers
	// (a feed's connected metric) hear it here, also when Run ends early.
	if c.connected.Swap(false) {
		c.obs.Observe(source.Event{Kind: source.Disconnected, Broker: c.brokerURL()})
	}
	if c.cfg.Adopt {
		return c.adopt.Result(runErr, c.share)
	}
	return runErr
}

func (c *Consumer) clientConfig(subCtx context.Context) autopaho.ClientConfig {
	cfg := c.cfg
	return autopaho.ClientConfig{
		ServerUrls:                    c.urls,
		TlsCfg:                        cfg.TLS,
		KeepAlive:                     uint16(max(1, cfg.KeepAlive.Round(time.Second)/time.Second)),
		CleanStartOnInitialConnection: cfg.CleanStart && !cfg.Adopt,
		SessionExpiryInterval:         uint32(cfg.SessionExpiry / time.Second),
		ReconnectBackoff:              c.reconnectWait,
		ConnectTimeout:                cfg.ConnectTimeout,
		AttemptConnection:             bufferedDialer(c.urls, cfg.TLS, &c.leave),
		ConnectUsername:               cfg.Username,
		ConnectPassword:               []byte(cfg.Password),
		ConnectPacketBuilder:          c.buildConnect,
		OnConnectionUp:                func(cm *autopaho.ConnectionManager, ca *paho.Connack) { c.connectionUp(subCtx, cm, ca) },
		OnConnectionDown:              func() bool { return c.connectionDown(subCtx) },
		OnConnectError:                c.connectError,
		ClientConfig: paho.ClientConfig{
			ClientID:           cfg.ClientID,
			PingHandler:        c.stall,
			OnPublishReceived:  []func(paho.PublishReceived) (bool, error){c.receive},
			OnClientError:      c.clientError,
			OnServerDisconnect: c.serverDisconnect,
			// paho acknowledges each delivery as its handler returns; the
			// gate holds those back until the commit (see ackGate).
			Session: c.gate,
		},
	}
}

// buildConnect completes each CONNECT and notes which broker it goes to:
// autopaho tries brokers one at a time, and a connection's deliveries all
// arrive before the next attempt, so the URL noted is the one they came
// through.
func (c *Consumer) buildConnect(cp *paho.Connect, u *url.URL) (*paho.Connect, error) {
	if c.cfg.Adopt && c.adopt.up.Load() {
		return nil, errAdoptedOnce // the adopted session is not taken again
	}
	if c.hold.Held() {
		return nil, consume.ErrHeld
	}
	broker := u.Redacted()
	c.broker.Store(&broker)
	round, wait := c.reconnects.current()
	c.log.Info("mqtt connecting", "broker", broker, "attempt", round, "wait", wait)
	if cp.Properties == nil {
		cp.Properties = &paho.ConnectProperties{}
	}
	rm := c.cfg.ReceiveMaximum
	cp.Properties.ReceiveMaximum = &rm
	return cp, nil
}

// reconnectWait is autopaho's ReconnectBackoff: the wait before round
// attempt+1 over the brokers, logged as it starts so that the log says how
// long the consumer will be away.
func (c *Consumer) reconnectWait(attempt int) time.Duration {
	if c.cfg.Adopt && c.adopt.up.Load() {
		return c.cfg.ConnectRetryMax // no other connection is made (errAdoptedOnce): Run is ending
	}
	if c.hold.Active() {
		c.heldAt.Store(int64(attempt))
		return consume.HoldPoll
	}
	attempt = max(0, attempt-int(c.heldAt.Load()))
	wait := c.reconnects.delay(attempt)
	switch {
	case wait == 0:
	case attempt > 0:
		c.log.Info("mqtt waiting before reconnecting: no broker accepted the last round",
			"wait", wait, "attempt", attempt+1, "brokers", len(c.urls))
	default:
		c.log.Info("mqtt waiting before reconnecting: the last connection was a flap (too short, no traffic, or the broker asked for a backoff)",
			"wait", wait, "attempt", attempt+1, "flaps", c.reconnects.flapCount())
	}
	return wait
}

func (c *Consumer) brokerURL() string {
	if b := c.broker.Load(); b != nil {
		return *b
	}
	return ""
}

func (c *Consumer) connectionUp(ctx context.Context, cm *autopaho.ConnectionManager, ca *paho.Connack) {
	conn := c.share.Connection() // before anything: a loss of this connection may follow at once
	c.reconnects.up(time.Now())
	c.heldAt.Store(0) // autopaho counts the rounds of the next loss from 0
	if !ca.SessionPresent && !c.cfg.Adopt {
		// No subscription survived: not ready until this connection's is
		// granted, rather than ready on the last one's for a moment.
		c.subscribed.Store(false)
	}
	c.connected.Store(true)
	broker := c.brokerURL()
	c.log.Info("mqtt connected", "broker", broker, "client_id", c.cfg.ClientID, "session_present", ca.SessionPresent)
	if !ca.SessionPresent && c.everSubbed.Load() {
		// Reconnects resume the session (clean start only on a Run's
		// first connection), which this Run's subscription made.
		c.log.Warn("mqtt reconnected, but the broker has no session for this consumer: what it held for it since the last connection is lost "+
			"(the broker restarted without persisting the session, expired it before mqtt.session_expiry, or is a standby that never had it); "+
			"a sequenced route shows the loss as gaps, an id route cannot",
			"broker", broker, "client_id", c.cfg.ClientID, "session_expiry", c.cfg.SessionExpiry)
	}
	c.obs.Observe(source.Event{Kind: source.Connected, Broker: broker})
	if c.cfg.Adopt {
		c.adoptUp(ca)
		return
	}
	if c.share.Left() { // stopping: the session delivers what it holds, no more
		return
	}
	// Subscribe on a Run's first connection (the filters may have changed),
	// whenever the broker has no session, and, in a share group, on every
	// connection: a session restored from a broker's persistence may lack
	// its $share subscriptions (Mosquitto 2.0.11 persists plain ones only),
	// and a member would then receive nothing. Subscribing again to a
	// subscription the session has replaces it without losing messages.
	// Plain subscriptions are not renewed on a present session: mochi-mqtt
	// refuses a SUBSCRIBE whose packet id its own in-flight deliveries use
	// (0x91), though the two directions' ids are independent.
	if ca.SessionPresent && c.subscribed.Load() && c.cfg.ShareGroup == "" {
		return
	}
	// A renewal may be refused for a passing reason; only a Run's first
	// grant proves the filters, and only its refusal is fatal. A later
	// connection without the session (a failover to a standby that never
	// had it) subscribes after that first grant too: its refusal is
	// retried, not the end of Run.
	renewal := c.everSubbed.Load()
	c.subscribed.Store(false)
	c.wg.Go(func() { c.subscribe(ctx, cm, conn, renewal, ca.SessionPresent) })
}

// connectionDown notes the loss; the group's store then counts this member
// out of its share group until the broker grants the subscription again
// (its session, and the subscription with it, may be gone: expired, or
// started clean), recorded on a goroutine: autopaho waits for this.
func (c *Consumer) connectionDown(ctx context.Context) bool {
	quit := c.share.Lost()
	c.wg.Go(func() { quit(ctx) })
	held, proved := c.reconnects.down(time.Now())
	c.connected.Store(false)
	broker := c.brokerURL()
	// proved: the link carried traffic and held, so this is a failover and
	// the next round over the brokers starts at once; else a flap, backed off.
	c.log.Warn("mqtt connection lost", "broker", broker, "held", held.Round(time.Millisecond), "reconnect_at_once", proved && !c.cfg.Adopt)
	c.obs.Observe(source.Event{Kind: source.Disconnected, Broker: broker})
	if c.cfg.Adopt {
		c.adoptDown()
	}
	return true
}

func (c *Consumer) connectError(err error) {
	if errors.Is(err, errAdoptedOnce) || errors.Is(err, consume.ErrHeld) {
		return
	}
	broker := c.brokerURL()
	var ce *autopaho.ConnackError
	if errors.As(err, &ce) && ce.ReasonCode == unsupportedProtocolVersion {
		c.log.Error("mqtt broker refuses MQTT 5 (CONNACK: unsupported protocol version): set mqtt.protocol to 3.1.1 or auto",
			"broker", broker, "err", err)
	} else {
		c.log.Warn("mqtt connect failed", "broker", broker, "err", err)
	}
	c.obs.Observe(source.Event{Kind: source.ConnectFailed, Broker: broker, Err: err})
}

func (c *Consumer) clientError(err error) {
	c.log.Warn("mqtt connection error", "broker", c.brokerURL(), "err", err)
}

func (c *Consumer) serverDisconnect(d *paho.Disconnect) {
	if d.ReasonCode == sessionTakenOver && c.cfg.Adopt {
		c.log.Warn("mqtt adopting: the broker gave the adopted session to another connection with its client id: the gone member returned",
			"broker", c.brokerURL(), "client_id", c.cfg.ClientID)
		return
	}
	if d.ReasonCode == sessionTakenOver {
		c.log.Error("mqtt broker disconnected us: another client connected with the same client id",
			"broker", c.brokerURL(), "client_id", c.cfg.ClientID)
		return
	}
	c.log.Warn("mqtt broker disconnected us", "broker", c.brokerURL(), "reason_code", d.ReasonCode)
}

// subscribe subscribes to every filter. A refusal, or a grant at QoS 0,
// of a Run's first subscription ends Run; a lost connection leaves it to
// the next one. A refusal after that first grant (a share group's renewal,
// or a new session's subscription: the broker's access control changed,
// or a failover reached a broker whose differs) is logged at ERROR naming
// each route and filter (see consume.LogRefusal) and tried again on the
// same connection with a growing wait: it may be passing (mochi-mqtt's
// 0x91 clears as its in-flight deliveries are acknowledged, 0x97 with
// load, an ACL put back), and meanwhile Ready says no and NotReady why. On
// a present session the forms the configuration no longer asks for are
// removed once the grant is in (see Config.FormerShareGroups): before
// Ready says yes.
func (c *Consumer) subscribe(ctx context.Context, cm *autopaho.ConnectionManager, conn uint64, renewal, present bool) {
	sub := c.subscribePacket()
	b := consume.Backoff{Min: c.cfg.ConnectRetryMin, Max: c.cfg.ConnectRetryMax}
	for attempt := 1; ; attempt++ {
		sa, err := cm.Subscribe(ctx, sub)
		if sa != nil {
			err = nil // the SUBACK's reason codes say what paho's error does
			if r := c.checkSuback(sub, sa); r != nil {
				c.obs.Observe(source.Event{Kind: source.SubscribeRefused, Broker: c.brokerURL(), N: len(r.Topics), Err: r.Err})
				if !renewal {
					select {
					case c.fatal <- r.Err:
					default:
					}
					return
				}
				why := r.Err.Error()
				c.refused.Store(&why)
				wait := b.Delay(attempt)
				consume.LogRefusal(c.log, c.brokerURL(), r, attempt, wait)
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				continue
			}
		}
		if err != nil {
			c.log.Warn("mqtt subscribe failed; retrying on the next connection", "broker", c.brokerURL(), "err", err)
			return
		}
		if present && !c.unsubscribeStale(ctx, cm) {
			return
		}
		c.share.Subscribed(ctx, conn)
		c.refused.Store(nil)
		c.subscribed.Store(true)
		c.everSubbed.Store(true)
		c.log.Info("mqtt subscribed", "broker", c.brokerURL(), "filters", len(sub.Subscriptions))
		return
	}
}

// unsubscribeStale removes the subscription forms a resumed session may
// hold that the configuration no longer asks for, after the ones it asks
// for were granted: a message published in between comes through both
// (its copy is found duplicate), none through neither. An answer 0x11 (no
// such subscription) is the common case; another refusal is logged, the
// session then gets those messages twice. It reports false when the
// connection failed before the answer: the next connection tries again.
func (c *Consumer) unsubscribeStale(ctx context.Context, cm *autopaho.ConnectionManager) bool {
	stale := consume.StaleForms(c.cfg.Filters, c.cfg.ShareGroup, c.cfg.FormerShareGroups, c.cfg.FormerFilters)
	if len(stale) == 0 {
		return true
	}
	ua, err := cm.Unsubscribe(ctx, &paho.Unsubscribe{Topics: stale})
	if err != nil && ua == nil {
		c.log.Warn("mqtt unsubscribe of the forms no longer configured failed; retrying on the next connection",
			"broker", c.brokerURL(), "err", err)
		return false
	}
	var removed []string
	for i, topic := range stale {
		code := byte(0x80) // no reason code for it
		if i < len(ua.Reasons) {
			code = ua.Reasons[i]
		}
		switch code {
		case 0x00:
			removed = append(removed, topic)
		case 0x11: // no such subscription
		default:
			c.log.Warn("mqtt broker refused to remove a subscription the configuration no longer asks for: its messages come twice",
				"broker", c.brokerURL(), "topic", topic, "reason_code", code)
		}
	}
	if len(removed) > 0 {
		c.log.Info("mqtt removed subscriptions the configuration no longer asks for", "broker", c.brokerURL(), "topics", removed)
	}
	return true
}

// unsubscribeShared removes the share group's filters from the session,
// as Run stops after the store granted this member leave; the Unshared
// ones stay. A filter the session no longer holds (0x11) is gone too.
func (c *Consumer) unsubscribeShared(ctx context.Context, cm *autopaho.ConnectionManager) error {
	var topics []string
	for _, f := range c.cfg.Filters {
		if t := c.cfg.subscriptionTopic(f); !f.Unshared && !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	ua, err := cm.Unsubscribe(ctx, &paho.Unsubscribe{Topics: topics})
	if err != nil && ua == nil {
		return err
	}
	for i, topic := range topics {
		routes := consume.Refused(c.cfg.Filters, c.cfg.ShareGroup, topic)
		if i >= len(ua.Reasons) {
			return fmt.Errorf("%q%s: no reason code in UNSUBACK", topic, routes)
		}
		if code := ua.Reasons[i]; code != 0x00 && code != 0x11 {
			return fmt.Errorf("%q%s: reason code 0x%02x", topic, routes, code)
		}
	}
	return nil
}

// subscribePacket subscribes to every filter, with the $share prefix in a
// share group.
func (c *Consumer) subscribePacket() *paho.Subscribe {
	sub := &paho.Subscribe{}
	for _, f := range c.cfg.Filters {
		topic := c.cfg.subscriptionTopic(f)
		if i := slices.IndexFunc(sub.Subscriptions, func(s paho.SubscribeOptions) bool { return s.Topic == topic }); i >= 0 {
			sub.Subscriptions[i].QoS = max(sub.Subscriptions[i].QoS, f.QoS) // two routes, one filter
			continue
		}
		sub.Subscriptions = append(sub.Subscriptions, paho.SubscribeOptions{
			Topic: topic,
			QoS:   f.QoS,
			// Retained messages only when the subscription is new, not
			// again on every start of a persistent session.
			RetainHandling: 1,
		})
	}
	return sub
}

// checkSuback returns what sa did not grant of sub as asked, each error
// wrapping ErrSubscribe and naming the filter and the routes that asked
// for it; nil when it granted everything.
func (c *Consumer) checkSuback(sub *paho.Subscribe, sa *paho.Suback) *consume.Refusal {
	var r consume.Refusal
	for i, s := range sub.Subscriptions {
		routes := consume.Refused(c.cfg.Filters, c.cfg.ShareGroup, s.Topic)
		if i >= len(sa.Reasons) {
			r.Add(c.cfg.Filters, c.cfg.ShareGroup, s.Topic, false, fmt.Errorf("%w: %q%s: no reason code in SUBACK", ErrSubscribe, s.Topic, routes))
			continue
		}
		switch code := sa.Reasons[i]; {
		case code >= 0x80:
			r.Add(c.cfg.Filters, c.cfg.ShareGroup, s.Topic, consume.PassingSuback(code),
				fmt.Errorf("%w: %q%s: reason code 0x%02x (%s)", ErrSubscribe, s.Topic, routes, code, consume.SubackReason(code)))
		case code == 0: // requested 1 or 2
			r.Add(c.cfg.Filters, c.cfg.ShareGroup, s.Topic, false,
				fmt.Errorf("%w: %q%s granted at QoS 0: messages lost in transit could not be redelivered", ErrSubscribe, s.Topic, routes))
		}
	}
	return r.Done()
}

// receive is paho's handler for every PUBLISH. It must not block: paho
// reads the connection, PINGRESPs included, on the goroutine that calls it.
func (c *Consumer) receive(pr paho.PublishReceived) (bool, error) {
	d := delivery{
		msg: engine.Message{
			Topic:   pr.Packet.Topic,
			Payload: pr.Packet.Payload,
			Dup:     pr.Packet.Duplicate(),
			Broker:  c.brokerURL(),
		},
		gate: c.gate,
		gen:  c.gate.generation(),
		pkt:  pr.Packet.Packet(),
		at:   time.Now(),
	}
	if d.gen != 0 && c.stamped.Swap(d.gen) != d.gen {
		d.msg.Connected = c.gate.upTime() // the connection's first delivery
	}
	c.reconnects.traffic()
	d.n = c.share.Received(d.msg.Topic, d.at)
	if c.prep != nil { // here, not on the goroutine that decides
		one := []engine.Message{d.msg}
		c.prep.Prepare(one)
		d.msg = one[0]
	}
	if c.q.Push(d) {
		c.obs.Observe(source.Event{Kind: source.Received, Broker: d.msg.Broker, N: 1})
	}
	return true, nil
}
