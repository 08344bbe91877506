package mqtt3

import (
	"bufio"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy forwards MQTT connections to a broker and records, per
// connection, the packet ids of the broker's PUBLISHes and of the client's
// PUBACKs, in order. Cut drops every connection at once: a network
// failure a real broker cannot be asked for. It is a fault injector, not a
// broker: the broker behind it is real.
type proxy struct {
	t      testing.TB
	l      net.Listener
	target string
	// connackDelay holds each CONNACK back this long: a broker that
	// accepts the connection and is slow to answer its CONNECT.
	connackDelay time.Duration
	// refuseSubacks, while set, turns every return code of the SUBACKs
	// passed on into 0x80: the broker refusing the subscriptions.
	refuseSubacks atomic.Bool

	mu    sync.Mutex
	conns []*proxied
	wg    sync.WaitGroup
}

// proxied is one forwarded connection and what went through it.
type proxied struct {
	client, broker net.Conn
	mu             sync.Mutex
	publishes      []uint16  // broker → client, QoS > 0
	pubacks        []uint16  // client → broker
	connack        time.Time // when the CONNACK was passed on
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	return startSlowProxy(t, target, 0)
}

// startSlowProxy is startProxy holding each CONNACK back for connackDelay.
func startSlowProxy(t testing.TB, target string, connackDelay time.Duration) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, l: l, target: target, connackDelay: connackDelay}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		l.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) URL() string { return "tcp://" + p.l.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxied{client: c, broker: b}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		p.wg.Go(func() {
			pc.pipe(b, c, func(typ byte, id uint16) {
				if typ == 2 { // CONNACK
					time.Sleep(p.connackDelay)
					pc.mu.Lock()
					pc.connack = time.Now()
					pc.mu.Unlock()
				}
				pc.note(&pc.publishes, typ == 3, id)
			}, p.rewrite)
		})
		p.wg.Go(func() { pc.pipe(c, b, func(typ byte, id uint16) { pc.note(&pc.pubacks, typ == 4, id) }, nil) })
	}
}

// Cut closes every connection forwarded so far.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.client.Close()
		c.broker.Close()
	}
}

// Conns returns the connections so far, in order.
func (p *proxy) Conns() []*proxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*proxied(nil), p.conns...)
}

func (c *proxied) note(list *[]uint16, ok bool, id uint16) {
	if !ok {
		return
	}
	c.mu.Lock()
	*list = append(*list, id)
	c.mu.Unlock()
}

// Connack returns when the CONNACK was passed on; zero before.
func (c *proxied) Connack() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connack
}

// Record returns the ids seen so far.
func (c *proxied) Record() (publishes, pubacks []uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint16(nil), c.publishes...), append([]uint16(nil), c.pubacks...)
}

// rewrite changes a packet from the broker before it is passed on: a
// SUBACK's return codes to 0x80 while refuseSubacks is set.
func (p *proxy) rewrite(typ byte, pkt []byte) {
	if typ != 9 || !p.refuseSubacks.Load() {
		return
	}
	n := 1
	for pkt[n]&0x80 != 0 { // the remaining length's bytes
		n++
	}
	for i := n + 1 + 2; i < len(pkt); i++ { // past the packet id
		pkt[i] = 0x80
	}
}

// pipe copies packets from src to dst, telling seen each packet's type
// and, for PUBLISH at QoS > 0 and PUBACK, its packet id, and letting
// rewrite, when set, change it first.
func (c *proxied) pipe(src, dst net.Conn, seen func(typ byte, id uint16), rewrite func(typ byte, pkt []byte)) {
	defer dst.Close()
	r := bufio.NewReader(src)
	for {
		pkt, typ, id, err := readPacket(r)
		if err != nil {
			return
		}
		seen(typ, id)
		if rewrite != nil {
			rewrite(typ, pkt)
		}
		if _, err := dst.Write(pkt); err != nil {
			return
		}
	}
}

// readPacket reads one MQTT packet whole, with its type and the packet id
// of a PUBLISH at QoS > 0 (3.1.1: after the topic) or of a PUBACK.
func readPacket(r *bufio.Reader) (pkt []byte, typ byte, id uint16, err error) {
	h, err := r.ReadByte()
	if err != nil {
		return nil, 0, 0, err
	}
	pkt = append(pkt, h)
	n, mul := 0, 1
	for {
		b, err := r.ReadByte()
		if err != nil {
			return nil, 0, 0, err
		}
		pkt = append(pkt, b)
		n += int(b&0x7f) * mul
		mul *= 128
		if b&0x80 == 0 {
			break
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, 0, 0, err
	}
	typ = h >> 4
	switch {
	case typ == 3 && (h>>1)&3 > 0 && len(body) >= 2:
		tl := int(body[0])<<8 | int(body[1])
		if len(body) >= 2+tl+2 {
			id = uint16(body[2+tl])<<8 | uint16(body[3+tl])
		}
	case typ == 4 && len(body) >= 2:
		id = uint16(body[0])<<8 | uint16(body[1])
	}
	return append(pkt, body...), typ, id, nil
}
