package forward

import (
	"net"
	"sync"
)

// corkConn is a connection whose writes, while it is corked, are held and
// written in one call when it is uncorked: paho.golang writes each PUBLISH
// on its own, in one write per part of the packet, and the MQTT output
// corks it while it tops its window up. A write while corked cannot fail;
// its error, if any, comes from Uncork.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	held   []byte
}

// Write writes p, or holds it while corked.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// Cork holds writes until Uncork.
func (c *corkConn) Cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// Uncork writes what was held, in one call. Uncorking an uncorked
// connection does nothing.
func (c *corkConn) Uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	return err
}
