package mqtt3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/mqttconn"
	"github.com/replayguard/replayguard/source"
)

// protocolName is what the logs call the protocol this package speaks.
const protocolName = "3.1.1"

// protocolVersion is MQTT 3.1.1's protocol level in CONNECT.
const protocolVersion = 4

// stallText is in the error paho's keepalive reports when a PINGRESP is
// missing (paho.mqtt.golang v1.5 ping.go); it has no sentinel for it.
const stallText = "pingresp not received"

// link is one connection: its own paho client, so that every delivery's
// Ack is bound to the connection that received it (paho routes an Ack to
// the router of the connection that delivered the message, and drops it
// once that connection is gone), and a generation the consumer checks
// before it acknowledges.
type link struct {
	c      *Consumer
	gen    uint64
	broker string
	client paho.Client
	// upAt is when the connection came up, in Unix nanoseconds: when the
	// broker's first bytes, its CONNACK, were read, or, where paho reads
	// the connection itself, the first delivery or Connect's return,
	// whichever came first (each follows the CONNACK; a resumed session
	// delivers before Connect returns). Its first delivery carries it
	// (engine.Message.Connected): never the CONNECT's time, which a broker
	// slow to answer, or one that never does, would set apart from the
	// connection's.
	upAt atomic.Int64

	delivered atomic.Bool // the connection delivered a message

	mu     sync.Mutex
	conn   net.Conn // as dialed, to abort the attempt
	dialOK bool     // a TCP (or TLS) connection was made

	lost     chan struct{} // closed when paho reports the connection lost
	lostErr  error
	lostOnce sync.Once
}

// clientOptions configures a paho client for one connection to u.
func (c *Consumer) clientOptions(ctx context.Context, u *url.URL, clean bool, l *link) *paho.ClientOptions {
	cfg := c.cfg
	o := paho.NewClientOptions().
		AddBroker(u.String()).
		SetClientID(cfg.ClientID).
		SetProtocolVersion(protocolVersion). // explicit: no silent fall back to 3.1
		SetCleanSession(clean).
		SetOrderMatters(true). // the handler runs in receive order, and never blocks
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetResumeSubs(false).
		SetAutoAckDisabled(true). // acknowledged after the commit, by Message.Ack
		SetKeepAlive(cfg.KeepAlive).
		SetPingTimeout(cfg.KeepAlive).
		SetConnectTimeout(cfg.ConnectTimeout).
		SetUsername(cfg.Username).
		SetPassword(cfg.Password).
		SetTLSConfig(cfg.TLS).
		SetStore(noStore{}).
		SetDefaultPublishHandler(l.receive).
		SetConnectionLostHandler(l.connectionLost)
	if mqttconn.DialsItself(u) {
		o.SetCustomOpenConnectionFn(dialer(ctx, cfg.TLS, cfg.ConnectTimeout, cfg.KeepAlive, &c.leave, l.dialed))
	}
	return o
}

// connect makes one connection to u: CONNECT with CleanSession 0 under the
// fixed client id, and the subscriptions when the broker has no session.
func (c *Consumer) connect(ctx context.Context, u *url.URL) (l *link, sessionPresent bool, err error) {
	c.lastGen++
	l = &link{c: c, gen: c.lastGen, broker: u.Redacted(), lost: make(chan struct{})}
	c.cur.Store(l.gen) // before CONNECT: a resumed session delivers at once
	l.client = paho.NewClient(c.clientOptions(ctx, u, false, l))
	c.log.Info("mqtt connecting", "broker", l.broker, "protocol", protocolName)
	tok := l.client.Connect()
	if err := l.wait(ctx, tok); err != nil {
		c.cur.Store(0)
		c.conn.Store(nil)
		return nil, false, l.connectError(err, tok.(*paho.ConnectToken).ReturnCode())
	}
	l.up()
	present := tok.(*paho.ConnectToken).SessionPresent()
	if !present && !c.cfg.Adopt {
		// No subscription survived: not ready until serve's is granted,
		// rather than ready on the last connection's for a moment.
		c.subscribed.Store(false)
	}
	c.connected.Store(true)
	c.log.Info("mqtt connected", "broker", l.broker, "protocol", protocolName, "client_id", c.cfg.ClientID, "session_present", present)
	if !present && c.everSubbed.Load() { // this Run's subscription made the session the reconnect resumes
		c.log.Warn("mqtt reconnected, but the broker has no session for this consumer: what it held for it since the last connection is lost "+
			"(the broker restarted without persisting the session, expired it under its persistent_client_expiration, or is a standby that never had it); "+
			"a sequenced route shows the loss as gaps, an id route cannot",
			"broker", l.broker, "client_id", c.cfg.ClientID)
	}
	c.obs.Observe(source.Event{Kind: source.Connected, Broker: l.broker})
	return l, present, nil
}

// up notes that the connection is up, if not noted yet, and returns when
// it came up, in UTC.
func (l *link) up() time.Time {
	l.upAt.CompareAndSwap(0, time.Now().UnixNano())
	return time.Unix(0, l.upAt.Load()).UTC()
}

// cleanSession discards the broker's session for the client id: a
// connection with CleanSession 1, closed at once.
func (c *Consumer) cleanSession(ctx context.Context, u *url.URL) error {
	l := &link{c: c, broker: u.Redacted(), lost: make(chan struct{})}
	l.client = paho.NewClient(c.clientOptions(ctx, u, true, l))
	tok := l.client.Connect()
	if err := l.wait(ctx, tok); err != nil {
		return l.connectError(err, tok.(*paho.ConnectToken).ReturnCode())
	}
	l.client.Disconnect(uint(c.cfg.ConnectTimeout / time.Millisecond))
	c.log.Info("mqtt session discarded (clean_start)", "broker", l.broker, "client_id", c.cfg.ClientID)
	return nil
}

// wait waits for tok; when ctx is done first, it closes the connection
// being made, so that the attempt ends at once.
func (l *link) wait(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
	case <-ctx.Done():
		l.mu.Lock()
		if l.conn != nil {
			_ = l.conn.Close()
		}
		l.mu.Unlock()
		<-tok.Done()
	}
	return tok.Error()
}

func (l *link) dialed(conn *corkedConn) {
	l.mu.Lock()
	l.conn, l.dialOK = conn, true
	l.mu.Unlock()
	conn.onFirstRead = func() { l.up() }
	if l.gen != 0 {
		l.c.conn.Store(conn)
	}
}

// connectError says why a CONNECT failed, naming what to set when the
// broker refused the protocol: a CONNACK with return code 1, or the
// connection closed after the CONNECT without a CONNACK.
func (l *link) connectError(err error, rc byte) error {
	l.mu.Lock()
	dialOK := l.dialOK
	l.mu.Unlock()
	switch {
	case rc == packets.ErrRefusedBadProtocolVersion:
		return fmt.Errorf("the broker refuses MQTT 3.1.1 (CONNACK: unacceptable protocol version): set mqtt.protocol to 5 or auto: %w", err)
	case rc == packets.ErrNetworkError && dialOK && isClosed(err):
		return fmt.Errorf("the broker closed the connection after the MQTT 3.1.1 CONNECT without a CONNACK (does it speak MQTT 3.1.1? mqtt.protocol: 5 or auto may fit): %w", err)
	}
	return err
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "EOF") ||
		strings.Contains(err.Error(), "connection reset")
}

// connectionLost is paho's ConnectionLostHandler, run on a goroutine of
// its own once the connection's goroutines have stopped.
func (l *link) connectionLost(_ paho.Client, err error) {
	l.lostOnce.Do(func() {
		l.lostErr = err
		close(l.lost)
	})
}

// receive is paho's handler for every PUBLISH, called in receive order on
// the goroutine that routes the connection's messages. It must not block.
func (l *link) receive(_ paho.Client, m paho.Message) {
	c := l.c
	first := l.delivered.CompareAndSwap(false, true)
	d := delivery{
		msg: engine.Message{Topic: m.Topic(), Payload: m.Payload(), Dup: m.Duplicate(), Broker: l.broker},
		m:   m,
		gen: l.gen,
		at:  time.Now(),
	}
	if first {
		d.msg.Connected = l.up() // the connection's first delivery
	}
	d.n = c.share.Received(d.msg.Topic, d.at)
	if c.prep != nil { // here, not on the goroutine that decides
		one := []engine.Message{d.msg}
		c.prep.Prepare(one)
		d.msg = one[0]
	}
	if c.q.Push(d) {
		c.obs.Observe(source.Event{Kind: source.Received, Broker: l.broker, N: 1})
	}
}
