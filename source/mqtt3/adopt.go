package mqtt3

import (
	"context"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/source"
)

// adoptOnce is the connection of an adopting Run (Config.Adopt): one
// round over the brokers, and the session served until the connection
// drops or ctx is done; never a second connection, so that a member that
// returned and took its session is never taken from.
func (c *Consumer) adoptOnce(ctx context.Context) {
	l, present := c.round(ctx)
	switch {
	case ctx.Err() != nil:
		if l != nil {
			l.client.Disconnect(1)
		}
		return
	case l == nil:
		c.adopt.End(fmt.Errorf("%w: no broker accepted the connection", ErrAdoption))
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
		c.adopt.End(fmt.Errorf("%w: client id %q", ErrNoSession, c.cfg.ClientID))
		return
	}
	c.serve(ctx, l, true)
	if ctx.Err() == nil {
		c.adopt.End(fmt.Errorf("%w: the connection was lost", ErrAdoption))
	}
}
