package demo

import (
	"io"
	"net"
	"sync"
	"time"
)

// link is the network between the consumers and one broker: a TCP relay on
// a loopback port of its own, which the story can cut and restore, and
// point at a broker once there is one. While it is down, or nothing is
// behind it, a connection is accepted and closed at once, so a client fails
// fast and tries its next broker.
type link struct {
	ln net.Listener
	wg sync.WaitGroup // the accept loop and the relays

	mu       sync.Mutex
	upstream string // broker address; "" while the link is down
	conns    map[net.Conn]struct{}
}

func newLink() (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, conns: map[net.Conn]struct{}{}}
	l.wg.Go(l.accept)
	return l, nil
}

// URL is the address clients use to reach the broker behind the link.
func (l *link) URL() string { return "tcp://" + l.ln.Addr().String() }

// connect relays new connections to the broker at addr.
func (l *link) connect(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.upstream = addr
}

// cut drops every connection through the link and refuses new ones until
// the next connect.
func (l *link) cut() {
	l.mu.Lock()
	l.upstream = ""
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// close stops the link and waits for its goroutines.
func (l *link) close() {
	l.ln.Close()
	l.cut()
	l.wg.Wait()
}

func (l *link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		up := l.upstream
		l.mu.Unlock()
		if up == "" {
			c.Close()
			continue
		}
		l.wg.Go(func() { l.relay(c, up) })
	}
}

// relay copies bytes both ways between c and the broker at up until either
// side closes or the link is cut.
func (l *link) relay(c net.Conn, up string) {
	b, err := net.DialTimeout("tcp", up, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !l.track(c, b) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done // one side ended: end both
	l.untrack(c, b)
	<-done
}

// track registers a relayed pair; false (both closed) when the link was
// cut meanwhile.
func (l *link) track(c, b net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.upstream == "" {
		c.Close()
		b.Close()
		return false
	}
	l.conns[c], l.conns[b] = struct{}{}, struct{}{}
	return true
}

func (l *link) untrack(c, b net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	delete(l.conns, b)
	l.mu.Unlock()
	c.Close()
	b.Close()
}
