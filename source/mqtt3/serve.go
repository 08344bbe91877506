package mqtt3

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// serve keeps l until it drops or ctx is done (then it disconnects,
// waiting for the broker to close the connection until the leave
// deadline). It subscribes when the session needs it and reports how long
// the connection held and whether it delivered.
func (c *Consumer) serve(ctx context.Context, l *link, sessionPresent bool) (held time.Duration, delivered bool) {
	linkCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Subscribe to every filter on a Run's first connection (the filters
	// may have changed) and whenever the broker has no session; in a share
	// group, renew the $share subscriptions on every other connection: a
	// session restored from a broker's persistence may lack them (Mosquitto
	// 2.0.11 persists plain ones only). MQTT 3.1.1 has no retain handling:
	// each SUBSCRIBE sends the filter's retained messages again, so a plain
	// filter the present session holds is not subscribed again.
	subs := c.cfg.subscriptions()
	if !sessionPresent {
		c.holdsAll.Store(false)
	}
	all := !c.holdsAll.Load()
	if !all {
		maps.DeleteFunc(subs, func(topic string, _ byte) bool { return !strings.HasPrefix(topic, "$share/") })
	}
	if c.share.Left() || c.cfg.Adopt { // stopping, or adopting: the session delivers what it holds, no more
		clear(subs)
	}
	conn := c.share.Connection()
	c.live.Store(l)
	defer c.live.CompareAndSwap(l, nil)
	if c.cfg.Adopt { // the session resumed: leave the group on its behalf, on this connection
		c.subscribed.Store(true)
		c.adopt.Begin()
	}
	if len(subs) > 0 {
		// After the Run's first grant every subscription is a renewal,
		// with the session or without it (a failover to a standby that
		// never had it): only the first grant's refusal ends Run.
		renewal := c.everSubbed.Load()
		c.subscribed.Store(false)
		wg.Go(func() { c.subscribe(linkCtx, l, conn, subs, all, renewal, sessionPresent) })
	}
	select {
	case <-l.lost:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	c.cur.CompareAndSwap(l.gen, 0)
	c.conn.Store(nil)
	c.connected.Store(false)
	held = time.Since(l.up())
	if ctx.Err() != nil {
		l.client.Disconnect(c.quiesce())
		c.obs.Observe(source.Event{Kind: source.Disconnected, Broker: l.broker})
		return held, l.delivered.Load()
	}
	// The group's store counts this member out of its share group until the
	// broker grants the subscription again: its session, and the
	// subscription with it, may be gone (expired, or started clean).
	quit := c.share.Lost()
	c.quits.Go(func() { quit(ctx) })
	err := l.lostErr
	if err != nil && strings.Contains(err.Error(), stallText) {
		c.log.Warn("mqtt connection stalled: reconnecting", "broker", l.broker, "err", err)
		c.obs.Observe(source.Event{Kind: source.Stalled, Broker: l.broker, Err: err})
	}
	c.log.Warn("mqtt connection lost", "broker", l.broker, "held", held.Round(time.Millisecond), "err", err)
	c.obs.Observe(source.Event{Kind: source.Disconnected, Broker: l.broker})
	return held, l.delivered.Load()
}

// quiesce is paho's Disconnect wait in milliseconds: until the leave
// deadline, at least 1.
func (c *Consumer) quiesce() uint {
	deadline, ok := c.leave.Deadline()
	if !ok {
		return 1
	}
	return uint(max(1, time.Until(deadline).Milliseconds()))
}

// subscribe subscribes to subs (topic: QoS), every filter when all is
// set. A refusal, or a grant at QoS 0,
// of a Run's first subscription ends Run; a lost connection leaves it to
// the next one. A refusal after that first grant (a share group's renewal,
// or a new session's subscription: the broker's access control changed,
// or a failover reached a broker whose differs) is logged at ERROR naming
// each route and filter (see consume.LogRefusal) and tried again on the
// same connection with a growing wait, and meanwhile Ready says no and
// NotReady why. When every filter was subscribed on a present
// session, the forms the configuration no longer asks for are removed
// once the grant is in (see Config.FormerShareGroups): before Ready says
// yes.
func (c *Consumer) subscribe(ctx context.Context, l *link, conn uint64, subs map[string]byte, all, renewal, present bool) {
	b := consume.Backoff{Min: c.cfg.ConnectRetryMin, Max: c.cfg.ConnectRetryMax}
	for attempt := 1; ; attempt++ {
		tok := l.client.SubscribeMultiple(subs, nil) // every message goes to the default handler
		select {
		case <-tok.Done():
		case <-ctx.Done():
			return
		}
		if err := tok.Error(); err != nil {
			c.log.Warn("mqtt subscribe failed; retrying on the next connection", "broker", l.broker, "err", err)
			return
		}
		r := c.checkGranted(subs, tok.(*paho.SubscribeToken).Result())
		if r == nil && all && present && !c.unsubscribeStale(ctx, l) {
			return
		}
		if r == nil {
			if all {
				c.holdsAll.Store(true)
			}
			for topic := range subs {
				if strings.HasPrefix(topic, "$share/") { // the group's: record that this member holds them
					c.share.Subscribed(ctx, conn)
					break
				}
			}
			c.refused.Store(nil)
			c.subscribed.Store(true)
			c.everSubbed.Store(true)
			c.log.Info("mqtt subscribed", "broker", l.broker, "filters", len(subs))
			return
		}
		c.obs.Observe(source.Event{Kind: source.SubscribeRefused, Broker: l.broker, N: len(r.Topics), Err: r.Err})
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
		consume.LogRefusal(c.log, l.broker, r, attempt, wait)
		if !consume.Sleep(ctx.Done(), wait) {
			return
		}
	}
}

// unsubscribeShared removes the share group's filters from the session
// of the connection up, as Run stops after the store granted this member
// leave; the Unshared ones stay.
func (c *Consumer) unsubscribeShared(ctx context.Context) error {
	l := c.live.Load()
	if l == nil {
		return errors.New("not connected")
	}
	var topics []string
	for topic := range c.cfg.subscriptions() {
		if strings.HasPrefix(topic, "$share/") {
			topics = append(topics, topic)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	tok := l.client.Unsubscribe(topics...)
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	return tok.Error()
}

// unsubscribeStale removes the subscription forms a resumed session may
// hold that the configuration no longer asks for, after the ones it asks
// for were granted: a message published in between comes through both
// (its copy is found duplicate), none through neither. An UNSUBACK of
// MQTT 3.1.1 carries no reason code: one for a subscription the session
// did not hold is the same. It reports false when the connection failed
// before the answer: the next connection tries again.
func (c *Consumer) unsubscribeStale(ctx context.Context, l *link) bool {
	stale := consume.StaleForms(c.cfg.Filters, c.cfg.ShareGroup, c.cfg.FormerShareGroups, c.cfg.FormerFilters)
	if len(stale) == 0 {
		return true
	}
	tok := l.client.Unsubscribe(stale...)
	select {
	case <-tok.Done():
	case <-ctx.Done():
		return false
	}
	if err := tok.Error(); err != nil {
		c.log.Warn("mqtt unsubscribe of the forms no longer configured failed; retrying on the next connection",
			"broker", l.broker, "err", err)
		return false
	}
	c.log.Info("mqtt unsubscribed the forms the configuration no longer asks for", "broker", l.broker, "topics", stale)
	return true
}

// checkGranted checks a SUBACK's grants: 0x80 is a refusal, and QoS 0
// cannot be redelivered. It returns what was not granted as asked, each
// error wrapping ErrSubscribe and naming the filter and the routes that
// asked for it; nil when everything was.
func (c *Consumer) checkGranted(subs map[string]byte, granted map[string]byte) *consume.Refusal {
	var r consume.Refusal
	topics := make([]string, 0, len(subs))
	for t := range subs {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for _, t := range topics {
		routes := consume.Refused(c.cfg.Filters, c.cfg.ShareGroup, t)
		switch g, ok := granted[t]; {
		case !ok:
			r.Add(c.cfg.Filters, c.cfg.ShareGroup, t, false, fmt.Errorf("%w: %q%s: no return code in SUBACK", ErrSubscribe, t, routes))
		case g >= 0x80: // 3.1.1 says no more of why (MQTT 3.1.1 §3.9.3)
			r.Add(c.cfg.Filters, c.cfg.ShareGroup, t, false, fmt.Errorf("%w: %q%s: return code 0x%02x (failure: denied by the broker's access control, or a filter it does not take)",
				ErrSubscribe, t, routes, g))
		case g == 0:
			r.Add(c.cfg.Filters, c.cfg.ShareGroup, t, false, fmt.Errorf("%w: %q%s granted at QoS 0: messages lost in transit could not be redelivered", ErrSubscribe, t, routes))
		}
	}
	return r.Done()
}
