package mqtt

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

	"github.com/eclipse/paho.golang/autopaho"
)

// readBufferSize is the read buffer of a connection the consumer dials.
const readBufferSize = 64 << 10

// bufferedDialer returns autopaho's AttemptConnection for brokers it can
// dial itself, with a read buffer: paho reads each packet in several small
// reads, a system call each without one. Its connections close gracefully
// once leave is set (see bufferedConn.Close). It returns nil, leaving the
// dialling to autopaho, when a broker is reached over WebSocket or a proxy
// is configured in the environment.
func bufferedDialer(urls []*url.URL, tlsCfg *tls.Config, leave *leaving) func(context.Context, autopaho.ClientConfig, *url.URL) (net.Conn, error) {
	if os.Getenv("all_proxy") != "" || os.Getenv("ALL_PROXY") != "" {
		return nil
	}
	for _, u := range urls {
		if !dialsItself(u) {
			return nil
		}
	}
	return func(ctx context.Context, cfg autopaho.ClientConfig, u *url.URL) (net.Conn, error) {
		if cfg.ConnectTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cfg.ConnectTimeout)
			defer cancel()
		}
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
		return &bufferedConn{Conn: conn, r: bufio.NewReaderSize(conn, readBufferSize), leave: leave}, nil
	}
}

func dialsItself(u *url.URL) bool {
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

// leaving is set when the consumer is about to send its DISCONNECT: its
// connections then close gracefully, waiting for the broker until the
// deadline. It is safe for concurrent use.
type leaving struct{ by atomic.Int64 } // Unix nanoseconds; 0 while staying

func (l *leaving) set(deadline time.Time) { l.by.Store(deadline.UnixNano()) }
func (l *leaving) clear()                 { l.by.Store(0) }

// deadline is the end of the wait for the broker, and whether the consumer
// is leaving at all.
func (l *leaving) deadline() (time.Time, bool) {
	if l == nil {
		return time.Time{}, false
	}
	by := l.by.Load()
	return time.Unix(0, by), by != 0
}

// bufferedConn reads through a buffer. paho reads a connection on one
// goroutine at a time; readMu lets Close take the reading over. It is also
// the sync.Locker paho holds while it writes one packet in several calls,
// so that no other packet (a run of PUBACKs included, see ackGate) lands
// in between: a TLS connection needs it, a TCP one does no harm.
type bufferedConn struct {
	net.Conn
	r     *bufio.Reader
	leave *leaving
	sync.Mutex
	readMu sync.Mutex
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	return c.r.Read(p)
}

// Close closes the connection. While the consumer is leaving, it first
// half-closes it and reads until the broker closes its side (or the leave
// deadline passes): PUBACKs have no acknowledgement of their own, and a
// broker reads a connection's packets in turn with other connections' (one
// packet per turn, in Mosquitto 2.0.11), so a restarted consumer's CONNECT
// under the same client id could otherwise take the session over before
// the broker read the last PUBACKs, and it would discard them with the old
// connection. A broker closes its side after reading the DISCONNECT, so
// when Close returns every acknowledgement written before it was read.
// Reading to the end also keeps unread data from turning the close into a
// reset.
func (c *bufferedConn) Close() error {
	if deadline, ok := c.leave.deadline(); ok {
		c.awaitPeerClose(deadline)
	}
	return c.Conn.Close()
}

func (c *bufferedConn) awaitPeerClose(deadline time.Time) {
	// The deadline bounds the half-close too: a TLS connection's CloseWrite
	// writes a close_notify, which waits behind a write the broker no
	// longer reads.
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
