package mqttprobe

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/replayguard/replayguard/internal/mqttconn"
)

// Version is an MQTT protocol level as CONNECT carries it.
type Version byte

// The versions replayguard speaks.
const (
	V311 Version = 4
	V5   Version = 5
)

func (v Version) String() string {
	switch v {
	case V311:
		return "3.1.1"
	case V5:
		return "5"
	}
	return fmt.Sprintf("level %d", byte(v))
}

// Options are what a probe's CONNECT carries and how long it waits.
type Options struct {
	// ClientID of the probe. Negotiate passes the consumer's id with
	// "-probe" appended.
	ClientID string
	// Username and Password, as the consumer sends them. Default none.
	Username, Password string
	// TLS for ssl://, tls:// and mqtts:// brokers. Default nil: the system
	// roots.
	TLS *tls.Config
	// Timeout bounds the connection and the wait for the CONNACK. Default
	// 10s.
	Timeout time.Duration
	// Setting is where the configuration sets the brokers and the
	// protocol, which Negotiate's error tells to check. Default "mqtt"
	// (mqtt.brokers, mqtt.protocol); a feed's is "mqtt.feeds[N]".
	Setting string
}

// Probe sends one CONNECT of version v to the broker at u and reports nil
// when the broker speaks v, an error wrapping ErrRefused when it refused v,
// or one wrapping ErrUnreachable when no MQTT answer came.
func Probe(ctx context.Context, u *url.URL, v Version, o Options) error {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, u, o.TLS)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write(connectPacket(v, o)); err != nil {
		return closedOrDown(ctx, v, err)
	}
	code, err := readConnack(bufio.NewReader(conn))
	if err != nil {
		return closedOrDown(ctx, v, err)
	}
	_, _ = conn.Write([]byte{0xE0, 0}) // DISCONNECT, normal
	if refuses(v, code) {
		return fmt.Errorf("%w: MQTT %s: CONNACK code 0x%02x (%s)", ErrRefused, v, code, codeText(v, code))
	}
	return nil
}

// closedOrDown classifies a failure after the connection was made: the
// broker closing it before any CONNACK refuses the version; a timeout is
// a broker that does not answer.
func closedOrDown(ctx context.Context, v Version, err error) error {
	if errors.Is(err, errNotConnack) {
		return fmt.Errorf("%w: MQTT %s: %v: is this an MQTT listener?", ErrRefused, v, err)
	}
	if ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset")) {
		return fmt.Errorf("%w: MQTT %s: the broker closed the connection after the CONNECT without a CONNACK", ErrRefused, v)
	}
	return fmt.Errorf("%w: no CONNACK to the MQTT %s CONNECT: %v", ErrUnreachable, v, err)
}

// refuses reports whether a CONNACK code refuses the version. A broker
// that does not speak MQTT 5 may answer its CONNECT with the 3.1.1 code 1.
func refuses(v Version, code byte) bool {
	return code == 0x01 || (v == V5 && code == 0x84)
}

func codeText(v Version, code byte) string {
	switch {
	case code == 0:
		return "accepted"
	case code == 0x01:
		return "unacceptable protocol version"
	case v == V5 && code == 0x84:
		return "unsupported protocol version"
	}
	return "refused"
}

// dial connects as the consumer will (mqttconn.Dial), so that a TLS
// handshake the broker does not speak fails in the same words.
func dial(ctx context.Context, u *url.URL, tlsCfg *tls.Config) (net.Conn, error) {
	if !mqttconn.Dialable(u) {
		return nil, fmt.Errorf("scheme %q cannot be probed", u.Scheme)
	}
	return mqttconn.Dial(ctx, u, tlsCfg)
}

// Probeable reports whether Probe can reach u: TCP and TLS brokers, not
// WebSocket ones.
func Probeable(u *url.URL) bool {
	switch strings.ToLower(u.Scheme) {
	case "ssl", "tls", "mqtts", "tcp", "mqtt":
		return true
	}
	return false
}
