package mqtt3

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/replayguard/replayguard/internal/mqttconn"
)

// dialer returns paho's OpenConnectionFunc for one connection attempt: it
// dials under ctx and timeout with a read buffer (mqttconn.DialBuffered;
// the connection closes gracefully once leave is set), bounds each write
// by writeTimeout, and reports the connection through dialed (so that the
// attempt can be aborted, and an EOF after the dial told apart from a
// broker that is down).
func dialer(ctx context.Context, tlsCfg *tls.Config, timeout, writeTimeout time.Duration, leave *mqttconn.Leaving, dialed func(*corkedConn)) paho.OpenConnectionFunc {
	return func(u *url.URL, _ paho.ClientOptions) (net.Conn, error) {
		conn, err := mqttconn.DialBuffered(ctx, u, tlsCfg, timeout, leave)
		if err != nil {
			return nil, err
		}
		cc := &corkedConn{Conn: conn, writeTimeout: writeTimeout}
		dialed(cc)
		return cc, nil
	}
}

// corkedConn is the consumer's connection (mqttconn.Conn: buffered reads,
// a graceful close while leaving) with its writes bounded in time and,
// while corked, gathered in a buffer that uncork writes at once: paho
// writes every PUBACK with a system call of its own, and the consumer
// corks the connection while it acknowledges a batch.
type corkedConn struct {
	*mqttconn.Conn

	writeMu      sync.Mutex // orders the writes, direct or gathered
	corked       bool
	pending      []byte
	writeTimeout time.Duration // bounds each write: a broker that stops reading is a stall

	// onFirstRead, when set before paho reads, is called once the first
	// bytes from the broker are read: its CONNACK.
	onFirstRead func()
	readOnce    sync.Once
}

func (c *corkedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.onFirstRead != nil {
		c.readOnce.Do(c.onFirstRead)
	}
	return n, err
}

func (c *corkedConn) Write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.corked {
		c.pending = append(c.pending, p...)
		return len(p), nil
	}
	return c.write(p)
}

// write writes p within the write timeout. paho writes PUBACKs and pings
// without a deadline: one blocked behind a broker that stopped reading
// would hold the keepalive too, and the stall would never be noticed.
// Called with writeMu held.
func (c *corkedConn) write(p []byte) (int, error) {
	if c.writeTimeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.writeTimeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

// cork gathers the writes from now on.
func (c *corkedConn) cork() {
	c.writeMu.Lock()
	c.corked = true
	c.writeMu.Unlock()
}

// uncork writes what was gathered, in one write, and writes directly
// again. A failed write loses only acknowledgements (the broker sends
// their messages again) or a ping (the keepalive ends the connection).
func (c *corkedConn) uncork() {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.corked = false
	if len(c.pending) > 0 {
		_, _ = c.write(c.pending)
		c.pending = c.pending[:0]
	}
}
