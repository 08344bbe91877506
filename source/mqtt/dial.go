package mqtt

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/eclipse/paho.golang/autopaho"
)

// readBufferSize is the read buffer of a connection the consumer dials.
const readBufferSize = 64 << 10

// bufferedDialer returns autopaho's AttemptConnection for brokers it can
// dial itself, with a read buffer: paho reads each packet in several small
// reads, a system call each without one. It returns nil, leaving the
// dialling to autopaho, when a broker is reached over WebSocket or a proxy
// is configured in the environment.
func bufferedDialer(urls []*url.URL, tlsCfg *tls.Config) func(context.Context, autopaho.ClientConfig, *url.URL) (net.Conn, error) {
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
		return &bufferedConn{Conn: conn, r: bufio.NewReaderSize(conn, readBufferSize)}, nil
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

// bufferedConn reads through a buffer. paho reads a connection on one
// goroutine at a time. It is also the sync.Locker paho holds while it
// writes one packet in several calls, so that no other packet (a run of
// PUBACKs included, see ackGate) lands in between: a TLS connection needs
// it, a TCP one does no harm.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
	sync.Mutex
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
