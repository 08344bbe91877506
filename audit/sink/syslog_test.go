package sink_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
)

// syslogReceiver reads RFC 6587 octet-counted RFC 5424 frames. With max
// set it fails the test on a message larger than max, which a receiver with
// that limit (rsyslog's maxMessageSize) would truncate or drop.
type syslogReceiver struct {
	recorder
	t     *testing.T
	max   int
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
	last  guarded[string]
	all   guarded[[]string]
}

type guarded[T any] struct {
	mu sync.Mutex
	v  T
}

func (a *guarded[T]) set(v T) { a.mu.Lock(); a.v = v; a.mu.Unlock() }
func (a *guarded[T]) get() T  { a.mu.Lock(); defer a.mu.Unlock(); return a.v }

func (s *syslogReceiver) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.ln = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.read(c) }()
		}
	}()
}

func (s *syslogReceiver) read(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		n, err := br.ReadString(' ')
		if err != nil {
			return
		}
		size, err := strconv.Atoi(strings.TrimSuffix(n, " "))
		if err != nil {
			s.t.Errorf("frame length %q: %v", n, err)
			return
		}
		if s.max > 0 && size > s.max {
			s.t.Errorf("a message of %d octets, over the receiver's limit of %d: it would be truncated or dropped", size, s.max)
		}
		msg := make([]byte, size)
		if _, err := io.ReadFull(br, msg); err != nil {
			return // the connection closed mid-frame: this frame was not received
		}
		s.last.set(string(msg))
		s.all.mu.Lock()
		s.all.v = append(s.all.v, string(msg))
		s.all.mu.Unlock()
		i := strings.Index(string(msg), "] {")
		var rec engine.AuditRecord
		if i < 0 || json.Unmarshal(msg[i+2:], &rec) != nil {
			s.t.Errorf("message without a record: %q", msg)
			return
		}
		s.add(rec.Position)
	}
}

func (s *syslogReceiver) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
}

func TestSyslogCatchesUpAfterTheListenerWasClosed(t *testing.T) {
	recv := &syslogReceiver{t: t}
	recv.listen("127.0.0.1:0")
	addr := recv.ln.Addr().String()
	r := newRig(t, "siem", sink.NewSyslog(sink.SyslogOptions{Address: addr, AppName: "rg-test", Facility: 16, Timeout: time.Second}))
	r.decide(t, 100)
	r.waitCursor(t, "siem", 100)
	waitCount(t, &recv.recorder, 100)
	if m := recv.last.get(); !strings.HasPrefix(m, "<134>1 ") || !strings.Contains(m, " rg-test - applied [replayguard@32473 position=\"100\" route=\"meters\"] {") {
		t.Fatalf("message %q is not RFC 5424 with facility local0, app rg-test, msgid applied", m)
	}

	recv.close()
	time.Sleep(20 * time.Millisecond) // the receiver's FIN reaches the sink's side
	r.decide(t, 150)
	time.Sleep(200 * time.Millisecond) // the sink fails to reconnect a few times
	if c, _ := r.st.Cursor(t.Context(), "siem"); c != 100 {
		t.Fatalf("cursor %d while the receiver is down, want 100", c)
	}
	if st := r.set.Status()[0]; st.Failures == 0 {
		t.Fatalf("no failure counted while down: %+v", st)
	}
	recv.listen(addr)
	r.waitCursor(t, "siem", 250)
	waitCount(t, &recv.recorder, 250)
	recv.close()
	checkReceived(t, recv.get(), 250)
}

func waitCount(t *testing.T, r *recorder, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(r.get()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d, want %d", len(r.get()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
