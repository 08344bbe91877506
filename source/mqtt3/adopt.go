package mqtt3

import (
	"context"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// adoptLeaving is the Leaving of an adopting consumer (Config.Adopt):
// leave is granted at once (the store's claim of the session is the
// grant) and nothing is recorded as the broker grants subscriptions, as
// none is asked.
func (c *Consumer) adoptLeaving() *consume.Leaving {
	cfg := c.cfg
	return &consume.Leaving{Group: cfg.ShareGroup, Ask: func(context.Context) (bool, error) { return true, nil },
		Timeout: cfg.ShutdownTimeout, Log: cfg.Logger, Filters: cfg.Filters, Adopted: cfg.Adopted, Unsubscribe: c.unsubscribeShared}
}

// startAdoption returns the context an adopting Run consumes under, done
// once the session is resumed (which starts the leaving, see
// consume.Leaving.Context); stop releases it. A Run whose ctx is done
// ends: it commits and acknowledges what it holds, and the rest waits in
// the session.
func (c *Consumer) startAdoption(ctx context.Context) (context.Context, func()) {
	adoptCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.beginAdoption = cancel
	stopped := context.AfterFunc(ctx, func() { c.endAdoption(fmt.Errorf("%w: stopped", ErrAdoption)) })
	return adoptCtx, func() {
		stopped()
		cancel()
	}
}

// adoptOnce is the connection of an adopting Run: one round over the
// brokers, and the session served until the connection drops or ctx is
// done; never a second connection, so that a member that returned and
// took its session is never taken from.
func (c *Consumer) adoptOnce(ctx context.Context) {
	l, present := c.round(ctx)
	switch {
	case ctx.Err() != nil:
		if l != nil {
			l.client.Disconnect(1)
		}
		return
	case l == nil:
		c.endAdoption(fmt.Errorf("%w: no broker accepted the connection", ErrAdoption))
		return
	case !present:
		// CleanSession 0 made the broker a session without subscriptions,
		// which takes nothing: left as it is, for a member that returns
		// under this id may be connecting now.
		l.client.Disconnect(uint(c.cfg.ConnectTimeout / time.Millisecond))
		c.cur.CompareAndSwap(l.gen, 0)
		c.conn.Store(nil)
		c.connected.Store(false)
		c.obs.Observe(source.Event{Kind: source.Disconnected, Broker: l.broker})
		c.endAdoption(fmt.Errorf("%w: client id %q", ErrNoSession, c.cfg.ClientID))
		return
	}
	c.serve(ctx, l, true)
	if ctx.Err() == nil {
		c.endAdoption(fmt.Errorf("%w: the connection was lost", ErrAdoption))
	}
}

// endAdoption ends an adopting Run's consuming with err.
func (c *Consumer) endAdoption(err error) {
	select {
	case c.fatal <- err:
	default:
	}
}

// adoptResult is what an adopting Run returns: why it ended early, or
// nil once the session went quiet after the group's filters were
// unsubscribed.
func (c *Consumer) adoptResult(runErr error) error {
	if runErr != nil {
		return runErr
	}
	if !c.share.WentQuiet() {
		return fmt.Errorf("%w: the session did not go quiet", ErrAdoption)
	}
	return nil
}
