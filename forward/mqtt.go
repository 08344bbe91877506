package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/mqttconn"
)

// Defaults of MQTTOptions.
const (
	DefaultMQTTKeepAlive      = 30 * time.Second
	DefaultMQTTConnectTimeout = 10 * time.Second
	DefaultMQTTAckTimeout     = 30 * time.Second
	DefaultMQTTInFlight       = 128
)

// MQTTOptions configure NewMQTT.
type MQTTOptions struct {
	// Brokers are tried in order on each connection. Required. Schemes
	// tcp, mqtt (plain), ssl, tls, mqtts (TLS).
	Brokers []string
	// ClientID of the connection. Required; not the consumer's own: two
	// connections with one id take the session from each other.
	ClientID string
	// Username and Password of the CONNECT. Default none.
	Username, Password string
	// TLS configures the TLS brokers. Default nil: the system roots.
	TLS *tls.Config
	// KeepAlive of the connection. Default DefaultMQTTKeepAlive.
	KeepAlive time.Duration
	// ConnectTimeout bounds one connection attempt, CONNACK included.
	// Default DefaultMQTTConnectTimeout.
	ConnectTimeout time.Duration
	// AckTimeout bounds the wait for the PUBACK of the oldest publish in
	// flight; past it the connection is dropped and the attempt fails.
	// Default DefaultMQTTAckTimeout.
	AckTimeout time.Duration
	// InFlight is how many publishes may await their PUBACK at once (and
	// never more than the broker's receive maximum). Default
	// DefaultMQTTInFlight.
	InFlight int
	// Logger hears about connections. Default: discard.
	Logger *slog.Logger
}

// MQTT publishes each entry's payload, byte for byte, at QoS 1 to its
// topic (the entry's Target), with the replayguard-* MQTT 5 user
// properties (see Properties). Several publishes are in flight on one
// connection, written in order (a broker forwards one connection's
// publishes in the order it received them); Deliver counts an entry
// delivered only once it and every entry before it has its PUBACK.
//
// The connection is a clean session that ends with it: the outbox is the
// session. After a drop, what had no PUBACK is sent again from the outbox
// on the next connection, one at a time: a broker that closed the
// connection on one of them (its reset may have lost the PUBACKs of those
// before) closes it again on that one alone, which the error then names;
// the next time, the entry is refused (a *RefusedError) when the broker's
// DISCONNECT refuses the packet. A PUBACK that refuses an entry for good
// leaves the publishes written after it in flight for the next Deliver,
// which takes them over rather than publishing them again, unless the
// broker closes the connection just after it (Mosquitto does). It
// connects on the first Deliver.
type MQTT struct {
	opts  MQTTOptions
	urls  []*url.URL
	log   *slog.Logger
	conn  *mqttConn // the connection up, nil when none; Deliver's alone
	alone int       // how many entries of the next Deliver go one at a time: those in flight at a drop
	// struck is the entry the broker closed the last connection on, alone
	// in flight, with a reason code that refuses the packet; nil when the
	// last connection ended otherwise.
	struck *struckEntry
	// denied are the topics whose last copy a PUBACK refused as the
	// topic's (0x87 not authorized, 0x90 topic name invalid): their next
	// copies go alone in flight (see fill). At most maxDenied.
	denied map[string]bool
}

// maxDenied bounds MQTT.denied; past it the set starts again empty.
const maxDenied = 1024

// struckEntry names an outbox entry across Deliver calls.
type struckEntry struct {
	id  uint64
	key engine.Hash
}

// mqttConn is one connection and the session that tracks its PUBACKs.
type mqttConn struct {
	client *paho.Client
	raw    net.Conn  // the TCP or TLS connection
	cork   *corkConn // what paho writes on
	sess   *pubSession
	broker string
	quota  int       // in flight at most
	limit  uint32    // the broker's Maximum Packet Size; 0: none said
	gone   chan byte // the reason code of the broker's DISCONNECT, when it sent one
	// closing is set before this process disconnects: the broker's close
	// that follows (EOF) is no error of the connection.
	closing atomic.Bool
	// behind are the publishes in flight after an entry whose PUBACK
	// refused it for good, which the next publish call takes over.
	behind []inFlight
}

// inFlight is a publish awaiting its PUBACK: the entry's id and key, and
// the channel its reason code arrives on.
type inFlight struct {
	id  uint64
	key engine.Hash
	ack chan byte
}

// disconnectGrace is how long a lost connection's error waits for the
// reason code of the broker's DISCONNECT: paho hands it over just after the
// connection ends.
const disconnectGrace = 50 * time.Millisecond

// NewMQTT returns an MQTT output. It does not connect yet.
func NewMQTT(opts MQTTOptions) (*MQTT, error) {
	if opts.ClientID == "" {
		return nil, fmt.Errorf("%w: the mqtt output needs a client id", ErrConfig)
	}
	if len(opts.Brokers) == 0 {
		return nil, fmt.Errorf("%w: the mqtt output needs a broker", ErrConfig)
	}
	if opts.KeepAlive < 0 || opts.ConnectTimeout < 0 || opts.AckTimeout < 0 || opts.InFlight < 0 {
		return nil, fmt.Errorf("%w: negative mqtt output setting", ErrConfig)
	}
	setDefault(&opts.KeepAlive, DefaultMQTTKeepAlive)
	setDefault(&opts.ConnectTimeout, DefaultMQTTConnectTimeout)
	setDefault(&opts.AckTimeout, DefaultMQTTAckTimeout)
	setDefault(&opts.InFlight, DefaultMQTTInFlight)
	m := &MQTT{opts: opts, log: opts.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	for _, b := range opts.Brokers {
		u, err := url.Parse(b)
		if err != nil || u.Host == "" || !mqttconn.Dialable(u) {
			return nil, fmt.Errorf("%w: mqtt output broker %q is not a tcp://, mqtt://, ssl://, tls:// or mqtts:// URL", ErrConfig, b)
		}
		m.urls = append(m.urls, u)
	}
	return m, nil
}

// Deliver implements Output.
func (m *MQTT) Deliver(ctx context.Context, entries []engine.OutboxEntry) (int, error) {
	return m.deliverEach(ctx, entries, nil)
}

// deliverEach is Deliver, calling acked(i), when not nil, as soon as
// entries[i] and every one before it have their PUBACKs: the drainer
// counts each entry delivered then, not once the whole page is, which a
// PUBACK that does not come puts off by the ack timeout.
func (m *MQTT) deliverEach(ctx context.Context, entries []engine.OutboxEntry, acked func(i int)) (int, error) {
	c, err := m.connection(ctx)
	if err != nil {
		return 0, err
	}
	n, err := m.publish(ctx, c, entries, acked)
	if err != nil {
		var ref *RefusedError
		if !errors.As(err, &ref) {
			m.drop(c) // what is in flight is sent again on a new connection
		}
	}
	return n, err
}

// publish writes entries in order with up to c.quota in flight, and
// returns how many of them, from the first, have their PUBACK. It tops the
// window up once per wake, with every PUBACK that has come by then taken,
// and writes the publishes of a top-up in one write.
func (m *MQTT) publish(ctx context.Context, c *mqttConn, entries []engine.OutboxEntry, tell func(i int)) (int, error) {
	acks := make([]chan byte, len(entries))
	sent, acked := c.resume(entries, acks), 0
	alone := m.alone
	m.alone = 0
	var deadline *time.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	for acked < len(entries) {
		var err error
		if sent, err = c.fill(ctx, entries, acks, sent, acked, alone, m.denied); err != nil {
			return acked, err
		}
		if deadline == nil {
			deadline = time.NewTimer(m.opts.AckTimeout)
		}
		mqttconn.QuickAck(c.raw) // nothing to write: the broker's PUBACKs must not wait for our ACK
		select {
		case rc := <-acks[acked]:
			if rc >= 0x80 {
				return acked, m.refused(c, entries, acks, acked, sent, rc)
			}
			m.allowed(entries[acked].Target)
			acked++
			for ; acked < sent && len(acks[acked]) > 0; acked++ { // those that came meanwhile
				if rc := <-acks[acked]; rc >= 0x80 {
					return acked, m.refused(c, entries, acks, acked, sent, rc)
				}
				m.allowed(entries[acked].Target)
			}
			if tell != nil {
				tell(acked - 1)
			}
			deadline.Reset(m.opts.AckTimeout) // the next oldest gets its own time
		case <-c.client.Done():
			for ; acked < sent && len(acks[acked]) > 0; acked++ { // PUBACKs read before the end
				if rc := <-acks[acked]; rc >= 0x80 {
					return acked, pubackError(entries[acked], rc, acked)
				}
			}
			if acked == sent { // every publish sent had its PUBACK
				m.struck = nil
				if acked == len(entries) {
					return acked, nil // the next Deliver connects again
				}
				return acked, fmt.Errorf("mqtt connection to %s lost", c.broker)
			}
			rc, said := c.disconnectReason()
			m.alone = sent - acked
			struck := m.struck
			m.struck = nil
			if e := entries[acked]; said && sent-acked == 1 && packetRefusal[rc] {
				if struck != nil && *struck == (struckEntry{e.ID, e.Key}) {
					return acked, closedOn(e, rc, acked)
				}
				m.struck = &struckEntry{e.ID, e.Key}
			}
			return acked, c.lost(entries[acked], sent-acked, rc, said)
		case <-deadline.C:
			return acked, fmt.Errorf("mqtt broker %s sent no PUBACK within %s", c.broker, m.opts.AckTimeout)
		case <-ctx.Done():
			return acked, ctx.Err()
		}
	}
	return acked, nil
}

// fill publishes entries from sent on while fewer than c.quota await their
// PUBACK, each with its channel in acks, in one write, and returns the new
// sent. An entry larger than the broker takes is held back until those
// before it are delivered, then refused. Until the first alone entries
// have their PUBACK, one goes at a time. An entry to a denied topic goes
// alone in flight, after those before it have their PUBACKs: a broker that
// refuses it and closes the connection (Mosquitto) then leaves nothing
// unread, whose reset could take PUBACKs along.
func (c *mqttConn) fill(ctx context.Context, entries []engine.OutboxEntry, acks []chan byte, sent, acked, alone int, denied map[string]bool) (int, error) {
	c.cork.Cork()
	defer c.cork.Uncork()
	for sent < len(entries) && sent-acked < c.quota && (sent == acked || acked >= alone) {
		if sent > acked && (denied[entries[sent].Target] || denied[entries[sent-1].Target]) {
			break // alone in flight: wait for the PUBACKs before it, or for its own
		}
		if c.limit > 0 { // the broker set a Maximum Packet Size
			if size := publishSize(entries[sent]); size > int(c.limit) {
				if sent == acked { // every entry before it is delivered: hold it
					return sent, tooLarge(entries[sent], size, c.limit, c.broker, sent)
				}
				break // wait for the PUBACKs of the entries before it
			}
		}
		acks[sent] = make(chan byte, 1)
		if err := c.send(ctx, entries[sent], acks[sent]); err != nil {
			return sent, fmt.Errorf("mqtt publish to %s on %s: %w", entries[sent].Target, c.broker, err)
		}
		sent++
	}
	if err := c.cork.Uncork(); err != nil {
		return sent, fmt.Errorf("mqtt publish on %s: %w", c.broker, err)
	}
	return sent, nil
}

// refused is the error of a PUBACK of reason code rc, for entries[i]. A
// refusal for good leaves the connection up, unless the broker closes it
// just after (Mosquitto does, after an ACL's 0x87 or a payload over its
// message_size_limit): refused waits disconnectGrace for that, and the
// next Deliver then connects again rather than failing on the closed
// connection. On a connection that stays up the publishes written after
// the refused one, up to sent, stay in flight: the drainer holds the entry
// and calls again with those after it, and resume takes them over, so that
// they are not published a second time (a copy each to the subscribers
// again, for every refused entry).
func (m *MQTT) refused(c *mqttConn, entries []engine.OutboxEntry, acks []chan byte, i, sent int, rc byte) error {
	err := pubackError(entries[i], rc, i)
	if _, ok := err.(*RefusedError); !ok {
		return err
	}
	if rc == 0x87 || rc == 0x90 { // the topic's: its next copies go alone
		if m.denied == nil || len(m.denied) >= maxDenied {
			m.denied = map[string]bool{}
		}
		m.denied[entries[i].Target] = true
	}
	t := time.NewTimer(disconnectGrace)
	defer t.Stop()
	select {
	case <-c.client.Done():
		return err
	case <-t.C:
	}
	for j := i + 1; j < sent; j++ {
		c.behind = append(c.behind, inFlight{entries[j].ID, entries[j].Key, acks[j]})
	}
	return err
}

// allowed notes a PUBACK that took a copy to topic: it is denied no more
// (the broker's ACL changed).
func (m *MQTT) allowed(topic string) {
	if len(m.denied) > 0 {
		delete(m.denied, topic)
	}
}

// resume takes over, into acks, the publishes in flight behind a refused
// entry (refused) that entries begins with, and returns how many. Any it
// does not find there (the hold failed, and the refused entry comes
// again) are left to their PUBACKs, and published again.
func (c *mqttConn) resume(entries []engine.OutboxEntry, acks []chan byte) int {
	behind := c.behind
	c.behind = nil
	n := 0
	for n < len(behind) && n < len(entries) && entries[n].ID == behind[n].id && entries[n].Key == behind[n].key {
		acks[n] = behind[n].ack
		n++
	}
	return n
}

// disconnectReason is the reason code of the broker's DISCONNECT, and
// whether one came, waiting disconnectGrace for it: paho hands it over just
// after the connection ends.
func (c *mqttConn) disconnectReason() (byte, bool) {
	select {
	case rc := <-c.gone:
		return rc, true
	case <-time.After(disconnectGrace):
		return 0, false
	}
}

// lost is the error of a connection that ended with publishes awaiting
// their PUBACK. It names the oldest of them, and the reason code of the
// broker's DISCONNECT when one came (said): a broker that refuses a publish
// by closing the connection (Mosquitto, on a topic of more levels than it
// takes) does so at every attempt, and the entries behind it wait.
func (c *mqttConn) lost(oldest engine.OutboxEntry, awaiting int, rc byte, said bool) error {
	how := "lost"
	if said {
		how = fmt.Sprintf("closed by the broker's DISCONNECT of reason code 0x%02x%s", rc, reasonName(rc))
	}
	return fmt.Errorf("mqtt connection to %s %s with %d publishes awaiting PUBACK, the oldest to topic %s (key %s)",
		c.broker, how, awaiting, topicStart(oldest.Target), oldest.Key)
}

// packetRefusal are the DISCONNECT reason codes that refuse a packet the
// client sent: said of a publish alone in flight, they are its.
var packetRefusal = map[byte]bool{0x82: true, 0x90: true, 0x95: true, 0x99: true}

// closedOn refuses, for good, an entry the broker closed the connection on
// twice in a row, alone in flight, with a reason code of packetRefusal:
// sent again it would be refused again, and every entry behind it waits.
func closedOn(e engine.OutboxEntry, rc byte, i int) error {
	return &RefusedError{Index: i, Reason: fmt.Sprintf("mqtt broker closed the connection on this copy, alone in flight, twice in a row: "+
		"DISCONNECT reason code 0x%02x%s for topic %s", rc, reasonName(rc), topicStart(e.Target))}
}

// topicStart is a topic as an error shows it: quoted, its first 64
// characters and an ellipsis after when it has more.
func topicStart(t string) string {
	q := fmt.Sprintf("%.64q", t)
	if utf8.RuneCountInString(t) > 64 {
		q += "…"
	}
	return q
}

// pubackError is what a PUBACK reason code of 0x80 or more means: a
// refusal for good, or a passing one (0x80 unspecified, 0x97 quota
// exceeded) that a retry may clear.
func pubackError(e engine.OutboxEntry, rc byte, i int) error {
	why := fmt.Sprintf("mqtt PUBACK reason code 0x%02x%s for topic %q", rc, reasonName(rc), e.Target)
	if rc == 0x80 || rc == 0x97 {
		return errors.New(why)
	}
	return &RefusedError{Index: i, Reason: why}
}

// send writes one QoS 1 PUBLISH; its PUBACK's reason code arrives on ack.
func (c *mqttConn) send(ctx context.Context, e engine.OutboxEntry, ack chan<- byte) error {
	ps := Properties(e)
	user := make(paho.UserProperties, len(ps))
	for i, p := range ps {
		user[i] = paho.UserProperty{Key: p.Name, Value: p.Value}
	}
	c.sess.expect(ack)
	_, err := c.client.PublishWithOptions(ctx, &paho.Publish{QoS: 1, Topic: e.Target, Payload: e.Payload,
		Properties: &paho.PublishProperties{User: user}}, paho.PublishOptions{Method: paho.PublishMethod_AsyncSend})
	return err
}

// connection returns the connection up, or connects to the first broker
// that accepts.
func (m *MQTT) connection(ctx context.Context) (*mqttConn, error) {
	if c := m.conn; c != nil {
		select {
		case <-c.client.Done():
			m.conn = nil
		default:
			return c, nil
		}
	}
	var errs []error
	for _, u := range m.urls {
		c, err := m.dial(ctx, u)
		if err == nil {
			m.conn = c
			m.log.Info("forward: mqtt output connected", "broker", c.broker, "client_id", m.opts.ClientID, "in_flight", c.quota)
			return c, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u.Redacted(), err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("mqtt output connect (outputs.mqtt.brokers, by default the consumer's): %w", errors.Join(errs...))
}

func (m *MQTT) dial(ctx context.Context, u *url.URL) (*mqttConn, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.ConnectTimeout)
	defer cancel()
	conn, err := mqttconn.DialBuffered(ctx, u, m.opts.TLS, 0, nil) // paho reads a PUBACK in three reads
	if err != nil {
		return nil, err
	}
	c := &mqttConn{sess: newPubSession(), broker: u.Redacted(), raw: conn.Conn, cork: &corkConn{Conn: conn}, gone: make(chan byte, 1)}
	c.client = paho.NewClient(paho.ClientConfig{
		ClientID:      m.opts.ClientID,
		Conn:          packets.NewThreadSafeConn(c.cork),
		Session:       c.sess,
		PacketTimeout: m.opts.AckTimeout,
		OnClientError: func(err error) {
			if errors.Is(err, net.ErrClosed) || c.closing.Load() { // this process closed it (Close, or a drop after a failure)
				m.log.Debug("forward: mqtt output connection closed", "broker", c.broker)
				return
			}
			m.log.Warn("forward: mqtt output connection error", "broker", c.broker, "err", err)
		},
		OnServerDisconnect: func(d *paho.Disconnect) {
			select {
			case c.gone <- d.ReasonCode:
			default:
			}
			m.log.Warn("forward: mqtt broker disconnected the output", "broker", c.broker, "reason_code", d.ReasonCode)
		},
	})
	expiry := uint32(0)
	cp := &paho.Connect{ClientID: m.opts.ClientID, CleanStart: true, KeepAlive: uint16(max(1, m.opts.KeepAlive/time.Second)),
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}
	if m.opts.Username != "" {
		cp.Username, cp.UsernameFlag = m.opts.Username, true
	}
	if m.opts.Password != "" {
		cp.Password, cp.PasswordFlag = []byte(m.opts.Password), true
	}
	ca, err := c.client.Connect(ctx, cp)
	if err != nil {
		conn.Close()
		if ca != nil {
			return nil, fmt.Errorf("CONNACK reason code 0x%02x%s", ca.ReasonCode, reasonName(ca.ReasonCode))
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			// A broker that speaks MQTT 3.1.1 only closes the connection
			// on an MQTT 5 CONNECT, with no CONNACK it could read.
			return nil, fmt.Errorf("%w (the broker closed the connection on the CONNECT: the output speaks MQTT 5 only; "+
				"a broker of MQTT 3.1.1 only cannot take it, see outputs.mqtt.brokers)", err)
		}
		return nil, err
	}
	c.quota = m.opts.InFlight
	if ca.Properties != nil && ca.Properties.ReceiveMaximum != nil {
		c.quota = min(c.quota, int(*ca.Properties.ReceiveMaximum))
	}
	c.quota = max(c.quota, 1)
	if ca.Properties != nil && ca.Properties.MaximumPacketSize != nil {
		c.limit = *ca.Properties.MaximumPacketSize
	}
	return c, nil
}

// drop closes a connection that failed; the next Deliver connects again.
func (m *MQTT) drop(c *mqttConn) {
	if m.conn == c {
		m.conn = nil
	}
	c.closing.Store(true)
	_ = c.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
}

// Close implements Output: it disconnects.
func (m *MQTT) Close() error {
	if c := m.conn; c != nil {
		m.conn = nil
		c.closing.Store(true)
		_ = c.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
	}
	return nil
}

// reasonNames are the MQTT 5 reason codes a PUBACK or CONNACK of a
// publisher most often carries.
var reasonNames = map[byte]string{
	0x80: "unspecified error", 0x82: "protocol error", 0x83: "implementation specific error", 0x84: "unsupported protocol version",
	0x85: "client identifier not valid", 0x86: "bad user name or password", 0x87: "not authorized",
	0x88: "server unavailable", 0x89: "server busy", 0x8A: "banned", 0x90: "topic name invalid",
	0x95: "packet too large", 0x97: "quota exceeded", 0x99: "payload format invalid",
}

func reasonName(rc byte) string {
	if n, ok := reasonNames[rc]; ok {
		return " (" + n + ")"
	}
	return ""
}
