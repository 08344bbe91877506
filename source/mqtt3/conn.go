package mqtt3

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// readBufferSize is the read buffer of a connection the consumer dials:
// paho reads each packet in several small reads, a system call each
// without one.
const readBufferSize = 64 << 10

// dialsItself reports whether the consumer dials u itself (TCP or TLS,
// no proxy in the environment); WebSocket brokers are left to paho.
func dialsItself(u *url.URL) bool {
	if os.Getenv("all_proxy") != "" || os.Getenv("ALL_PROXY") != "" {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "tcp", "mqtt", "ssl", "tls", "mqtts":
		return true
	}
	return false
}

func isTLS(u *url.URL) bool {
	switch strings.ToLower(u.Scheme) {
	case "ssl", "tls", "mqtts":
		return true
	}
	return false
}

// dialer returns paho's OpenConnectionFunc for one connection attempt: it
// dials under ctx and timeout, wraps the connection in a read buffer and a
// writeTimeout on each write, and reports the connection through dialed (so that the attempt
// can be aborted, and an EOF after the dial told apart from a broker that
// is down).
func dialer(ctx context.Context, tlsCfg *tls.Config, timeout, writeTimeout time.Duration, leave *leaving, dialed func(*bufferedConn)) paho.OpenConnectionFunc {
	return func(u *url.URL, _ paho.ClientOptions) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var (
			conn net.Conn
			err  error
		)
		if isTLS(u) {
			d := tls.Dialer{Config: tlsCfg}
			conn, err = d.DialContext(ctx, "tcp", u.Host)
		} else {
			var d net.Dialer
			conn, err = d.DialContext(ctx, "tcp", u.Host)
		}
		if err != nil {
			return nil, err
		}
		bc := &bufferedConn{Conn: conn, r: bufio.NewReaderSize(conn, readBufferSize), leave: leave, writeTimeout: writeTimeout}
		dialed(bc)
		return bc, nil
	}
}

// leaving is set when the consumer is about to send its DISCONNECT: its
// connections then close gracefully, waiting for the broker until the
// deadline. It is safe for concurrent use.
type leaving struct{ by atomic.Int64 } // Unix nanoseconds; 0 while staying

func (l *leaving) set(deadline time.Time) { l.by.Store(deadline.UnixNano()) }
func (l *leaving) clear()                 { l.by.Store(0) }

func (l *leaving) deadline() (time.Time, bool) {
	by := l.by.Load()
	return time.Unix(0, by), by != 0
}

// bufferedConn reads through a buffer. paho reads a connection on one
// goroutine; readMu lets Close take the reading over. While corked, writes
// gather in a buffer that uncork writes at once: paho writes every PUBACK
// with a system call of its own, and the consumer corks the connection
// while it acknowledges a batch.
type bufferedConn struct {
	net.Conn
	r      *bufio.Reader
	leave  *leaving
	readMu sync.Mutex
	once   sync.Once

	writeMu      sync.Mutex // orders the writes, direct or gathered
	corked       bool
	pending      []byte
	writeTimeout time.Duration // bounds each write: a broker that stops reading is a stall
}

func (c *bufferedConn) Write(p []byte) (int, error) {
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
func (c *bufferedConn) write(p []byte) (int, error) {
	if c.writeTimeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.writeTimeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

// cork gathers the writes from now on.
func (c *bufferedConn) cork() {
	c.writeMu.Lock()
	c.corked = true
	c.writeMu.Unlock()
}

// uncork writes what was gathered, in one write, and writes directly
// again. A failed write loses only acknowledgements (the broker sends
// their messages again) or a ping (the keepalive ends the connection).
func (c *bufferedConn) uncork() {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.corked = false
	if len(c.pending) > 0 {
		_, _ = c.write(c.pending)
		c.pending = c.pending[:0]
	}
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	return c.r.Read(p)
}

// Close closes the connection. While the consumer is leaving, it first
// half-closes it and reads until the broker closes its side (or the leave
// deadline passes): a PUBACK has no acknowledgement of its own, and a
// restarted consumer's CONNECT under the same client id could otherwise
// take the session over before the broker read the last PUBACKs. paho
// closes a connection more than once; only the first close waits.
func (c *bufferedConn) Close() error {
	c.once.Do(func() {
		if deadline, ok := c.leave.deadline(); ok {
			c.awaitPeerClose(deadline)
		}
	})
	return c.Conn.Close()
}

func (c *bufferedConn) awaitPeerClose(deadline time.Time) {
	hc, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || c.Conn.SetDeadline(deadline) != nil || hc.CloseWrite() != nil {
		return
	}
	// paho's reader, if it is in a Read, returns by the deadline at the
	// latest; from then on Close reads.
	c.readMu.Lock()
	defer c.readMu.Unlock()
	_, _ = io.Copy(io.Discard, c.r)
}
