package jetstream_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// silencer forwards TCP connections to a server. silence makes the
// connections it carries go silent, both ways, without closing them: a
// connection whose peer vanished with no FIN nor RST (a host or a NAT
// gone, a network partition). Connections made after it forward again.
type silencer struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	silent map[net.Conn]bool
}

func newSilencer(t testing.TB, to string) *silencer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silencer{ln: ln, silent: map[net.Conn]bool{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			s.mu.Lock()
			s.conns = append(s.conns, c, u)
			s.mu.Unlock()
			go s.pipe(u, c)
			go s.pipe(c, u)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

func (s *silencer) url() string { return "nats://" + s.ln.Addr().String() }

// pipe copies src to dst until either closes; what src sends once it is
// silenced is read and dropped.
func (s *silencer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		s.mu.Lock()
		silent := s.silent[src]
		s.mu.Unlock()
		if silent {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			src.Close()
			return
		}
	}
}

// silence silences every connection carried so far.
func (s *silencer) silence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		s.silent[c] = true
	}
}

// A connection that goes silent without being closed (the server's host or
// a NAT between gone, a partition: no FIN, no RST) is replaced once the
// server's heartbeats stop and it does not answer either: the consumer
// reconnects and consumes again, rather than pulling into the void for
// minutes (until nats.go's pings give up on it) while Ready says yes.
func TestASilentConnectionIsReplaced(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	px := newSilencer(t, n.Addr())
	e, _ := meters(t)
	rec := newRecorder(e)
	c := start(t, testConfig(t, px.url()), rec)
	waitFor(t, "ready", 10*time.Second, c.Ready)
	px.silence()
	msgs := readings(20, "m1")
	publishAll(t, n, msgs)
	// Two heartbeats missed (30s), the server asked and unanswered (10s),
	// then a reconnect.
	allAcked(t, n, 60*time.Second)
	if got := kwh(e, "m1"); got != "20" {
		t.Errorf("meter/m1 kwh = %s, want 20", got)
	}
}
