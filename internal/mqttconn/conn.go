package mqttconn

import (
	"bufio"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Leaving is set when a consumer is about to send its DISCONNECT: its
// connections then close gracefully, waiting for the broker until the
// deadline. The zero value is staying. It is safe for concurrent use.
type Leaving struct{ by atomic.Int64 } // Unix nanoseconds; 0 while staying

// Set makes the connections close gracefully, waiting until deadline.
func (l *Leaving) Set(deadline time.Time) { l.by.Store(deadline.UnixNano()) }

// Clear makes the connections close at once again.
func (l *Leaving) Clear() { l.by.Store(0) }

// Deadline is the end of the wait for the broker, and whether the
// consumer is leaving at all (never, for a nil Leaving).
func (l *Leaving) Deadline() (time.Time, bool) {
	if l == nil {
		return time.Time{}, false
	}
	by := l.by.Load()
	return time.Unix(0, by), by != 0
}

// Conn is a connection that reads through a buffer and, while its Leaving
// is set, closes gracefully. paho reads a connection on one goroutine at a
// time; readMu lets Close take the reading over. Writes go straight to the
// connection. It is also a sync.Locker: paho.golang holds it while it
// writes one packet in several calls, and so does a writer of a run of
// acknowledgements, so that no packet lands inside another: a TLS
// connection needs it, a TCP one takes no harm.
type Conn struct {
	net.Conn
	r     *bufio.Reader
	leave *Leaving
	sync.Mutex
	readMu sync.Mutex
	once   sync.Once
}

// Read reads through the buffer.
func (c *Conn) Read(p []byte) (int, error) {
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
// reset. paho may close a connection more than once; only the first close
// waits.
func (c *Conn) Close() error {
	c.once.Do(func() {
		if deadline, ok := c.leave.Deadline(); ok {
			c.awaitPeerClose(deadline)
		}
	})
	return c.Conn.Close()
}

func (c *Conn) awaitPeerClose(deadline time.Time) {
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
