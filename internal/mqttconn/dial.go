package mqttconn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// ReadBufferSize is the read buffer of a connection DialBuffered makes:
// paho reads each packet in several small reads, a system call each
// without one.
const ReadBufferSize = 64 << 10

// Dialable reports whether u is a broker URL dialled over TCP (tcp, mqtt)
// or TLS (ssl, tls, mqtts), the schemes Dial takes; WebSocket ones (ws,
// wss) are not.
func Dialable(u *url.URL) bool {
	switch strings.ToLower(u.Scheme) {
	case "tcp", "mqtt", "ssl", "tls", "mqtts":
		return true
	}
	return false
}

// IsTLS reports whether u is a broker URL dialled over TLS (ssl, tls,
// mqtts).
func IsTLS(u *url.URL) bool {
	switch strings.ToLower(u.Scheme) {
	case "ssl", "tls", "mqtts":
		return true
	}
	return false
}

// DialsItself reports whether a consumer dials u itself, with
// DialBuffered: u is Dialable and no proxy is configured in the
// environment (all_proxy). Otherwise the dialling is left to the client
// library, which knows WebSocket and proxies.
func DialsItself(u *url.URL) bool {
	if os.Getenv("all_proxy") != "" || os.Getenv("ALL_PROXY") != "" {
		return false
	}
	return Dialable(u)
}

// Dial connects to u's host under ctx: over TLS with tlsCfg (nil: the
// system roots) when IsTLS(u), else over TCP. A TLS handshake a broker
// answers in plain text, or drops, says the broker may not speak TLS on
// that port.
func Dial(ctx context.Context, u *url.URL, tlsCfg *tls.Config) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil || !IsTLS(u) {
		return conn, err
	}
	cfg := &tls.Config{}
	if tlsCfg != nil {
		cfg = tlsCfg.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, handshakeError(err)
	}
	return tc, nil
}

// handshakeError says what a failed TLS handshake means when the broker
// answered it in plain text (it does not speak TLS), or closed the
// connection without a TLS alert (it may not).
func handshakeError(err error) error {
	var plain tls.RecordHeaderError
	switch {
	case errors.As(err, &plain):
		return fmt.Errorf("the broker does not speak TLS on this port (a plain MQTT listener? its URL would be tcp://): %w", err)
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("the broker closed the connection during the TLS handshake: it does not speak TLS on this port (a plain MQTT listener? its URL would be tcp://), or it refused the handshake: %w", err)
	}
	return err
}

// DialBuffered dials u as Dial does, within timeout when it is positive,
// and returns the connection with a read buffer; it closes gracefully once
// leave is set (see Conn.Close). leave may be nil: it never closes
// gracefully then.
func DialBuffered(ctx context.Context, u *url.URL, tlsCfg *tls.Config, timeout time.Duration, leave *Leaving) (*Conn, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	conn, err := Dial(ctx, u, tlsCfg)
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: conn, r: bufio.NewReaderSize(conn, ReadBufferSize), leave: leave}, nil
}
