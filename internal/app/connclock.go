package app

import (
	"sync/atomic"
	"time"

	rgsource "github.com/replayguard/replayguard/source"
)

// connClock passes a consumer's events on to next, noting when its
// connection came up: how long it has been up is what lets an adopter
// tell a member that lost its broker alone from one that is still coming
// back after an outage of the broker for everyone.
type connClock struct {
	next rgsource.Observer // nil: none
	up   atomic.Int64      // UnixNano of the current connection's Connected event; 0 while down
}

// Observe notes a connection up or down, then passes e on.
func (c *connClock) Observe(e rgsource.Event) {
	switch e.Kind {
	case rgsource.Connected:
		c.up.Store(time.Now().UnixNano())
	case rgsource.Disconnected:
		c.up.Store(0)
	}
	if c.next != nil {
		c.next.Observe(e)
	}
}

// upFor says how long the consumer's connection has been up; zero while
// it is down.
func (c *connClock) upFor() time.Duration {
	at := c.up.Load()
	if at == 0 {
		return 0
	}
	return time.Since(time.Unix(0, at))
}
