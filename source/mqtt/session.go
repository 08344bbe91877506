package mqtt

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho/session"
)

// ackGate is paho's session state with the acknowledgements taken over.
// paho acknowledges every delivery once its handler returns; the gate
// drops those and sends them itself when the consumer calls ack, after
// the commit. This replaces paho's manual acknowledgement tracker, whose
// cost grows with the deliveries in hand on every receipt (Mosquitto 2.0.11
// with max_queued_messages 0 was seen putting thousands in hand, past the
// Receive Maximum), and sends a run of PUBACKs in one write.
//
// Each connection has a generation, noted on its deliveries: paho calls
// ConAckReceived before the connection delivers anything and
// ConnectionLost before the next ConAckReceived, and runs no handler of a
// connection after the next one is up. ack holds the gate's lock across
// the check of the generation and the write, so an acknowledgement only
// ever goes out on the connection that received the delivery.
type ackGate struct {
	session.SessionManager

	cur  atomic.Uint64 // generation of the connection up, 0 when none
	upAt atomic.Int64  // when it came up (its CONNACK), Unix nanoseconds

	// onDisconnect, when set, hears the reason code of a broker's
	// DISCONNECT, on paho's reading goroutine, before paho reports the
	// connection down.
	onDisconnect func(reason byte)

	mu   sync.Mutex // held while a connection changes and while acks are written
	gen  uint64     // last generation handed out
	conn io.Writer  // the connection up, nil when none
	buf  bytes.Buffer
}

func newAckGate(s session.SessionManager) *ackGate { return &ackGate{SessionManager: s} }

// ConAckReceived starts a new generation on conn.
func (g *ackGate) ConAckReceived(conn io.Writer, cp *packets.Connect, ca *packets.Connack) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	g.conn = conn
	g.upAt.Store(time.Now().UnixNano())
	g.cur.Store(g.gen)
	return g.SessionManager.ConAckReceived(conn, cp, ca)
}

// ConnectionLost ends the current generation. paho calls it with the
// broker's DISCONNECT, when there was one, from the goroutine that read it,
// before it shuts the connection down (and again with nil as it does).
func (g *ackGate) ConnectionLost(dp *packets.Disconnect) error {
	if dp != nil && g.onDisconnect != nil {
		g.onDisconnect(dp.ReasonCode)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conn = nil
	g.cur.Store(0)
	return g.SessionManager.ConnectionLost(dp)
}

// Ack is paho's acknowledgement after the handler returned: dropped, the
// consumer acknowledges after the commit.
func (g *ackGate) Ack(*packets.Publish) error { return nil }

// write writes the buffered PUBACKs. paho writes a packet in several
// calls on connections (TLS, WebSocket) that are also a sync.Locker,
// holding the lock across them: so does write, not to split a packet.
func (g *ackGate) write() error {
	if l, ok := g.conn.(sync.Locker); ok {
		l.Lock()
		defer l.Unlock()
	}
	_, err := g.conn.Write(g.buf.Bytes())
	return err
}

// generation is that of the connection delivering now.
func (g *ackGate) generation() uint64 { return g.cur.Load() }

// upTime is when the connection up came up.
func (g *ackGate) upTime() time.Time { return time.Unix(0, g.upAt.Load()).UTC() }

// live reports whether the connection of generation gen is still up.
func (g *ackGate) live(gen uint64) bool { return gen != 0 && g.cur.Load() == gen }

// ack acknowledges the deliveries of pkts, in order, for those whose
// generation in gens is still up: PUBACKs in one write, a QoS 2 PUBREC
// through the session state, which tracks the exchange. It returns how
// many it sent; the others' connection is gone (or went during the write)
// and the broker sends them again.
func (g *ackGate) ack(pkts []*packets.Publish, gens []uint64) (sent int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.buf.Reset()
	pending := 0
	flush := func() bool {
		if g.buf.Len() > 0 {
			err := g.write()
			g.buf.Reset()
			if err != nil {
				return false
			}
		}
		sent += pending
		pending = 0
		return true
	}
	for i, pb := range pkts {
		if g.conn == nil || gens[i] != g.gen {
			continue
		}
		switch pb.QoS {
		case 0: // nothing to send
			pending++
			continue
		case 1:
			// PUBACK, success, no properties: MQTT 5 omits the reason code
			// and property length then (3.4.2.1), as MQTT 3.1.1 always does.
			g.buf.Write([]byte{packets.PUBACK << 4, 2, byte(pb.PacketID >> 8), byte(pb.PacketID)})
			pending++
			continue
		}
		if !flush() || g.SessionManager.Ack(pb) != nil {
			return sent
		}
		sent++
	}
	flush()
	return sent
}
