package mqttconn

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listen accepts one connection on a local port, hands it to handle and
// closes it; it returns the URL to dial, of scheme.
func listen(t *testing.T, scheme string, handle func(net.Conn)) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		handle(c)
	})
	return &url.URL{Scheme: scheme, Host: ln.Addr().String()}
}

func TestDialBuffered(t *testing.T) {
	u := listen(t, "mqtt", func(c net.Conn) { _, _ = c.Write([]byte("hello")) })
	conn, err := DialBuffered(context.Background(), u, nil, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Run("the connection is a sync.Locker, for writes in several calls", func(t *testing.T) {
		var _ sync.Locker = conn
	})
	t.Run("the connection reads what the peer wrote", func(t *testing.T) {
		got := make([]byte, 5)
		if _, err := io.ReadFull(conn, got); err != nil || string(got) != "hello" {
			t.Fatalf("read %q, %v", got, err)
		}
	})
	t.Run("a refused dial returns an error and no connection", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close() // nothing listens there any more
		conn, err := DialBuffered(context.Background(), &url.URL{Scheme: "tcp", Host: ln.Addr().String()}, nil, time.Second, nil)
		if err == nil || conn != nil {
			t.Fatalf("DialBuffered = %v, %v; want an error", conn, err)
		}
	})
}

func TestConnClose(t *testing.T) {
	// serve dials a peer that handles the connection, leaving by 5s.
	serve := func(t *testing.T, handle func(net.Conn)) (*Conn, *Leaving) {
		t.Helper()
		leave := &Leaving{}
		conn, err := DialBuffered(context.Background(), listen(t, "tcp", handle), nil, 5*time.Second, leave)
		if err != nil {
			t.Fatal(err)
		}
		leave.Set(time.Now().Add(5 * time.Second))
		return conn, leave
	}

	t.Run("a leaving connection returns from Close only after the peer read everything and closed", func(t *testing.T) {
		var got atomic.Pointer[string]
		conn, _ := serve(t, func(c net.Conn) {
			b, _ := io.ReadAll(c) // until the client's half-close
			s := string(b)
			got.Store(&s)
		})
		if _, err := conn.Write([]byte("PUBACKs then DISCONNECT")); err != nil {
			t.Fatal(err)
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
		if s := got.Load(); s == nil || *s != "PUBACKs then DISCONNECT" {
			t.Fatalf("when Close returned the peer had read %v", s)
		}
	})

	t.Run("unread data from the peer does not turn the close into a reset", func(t *testing.T) {
		readErr := make(chan error, 1)
		conn, _ := serve(t, func(c net.Conn) {
			var wg sync.WaitGroup
			defer wg.Wait()
			wg.Go(func() { _, _ = c.Write(make([]byte, 256<<10)) }) // never read by the client's user
			_, err := io.ReadAll(c)
			readErr <- err
		})
		if _, err := conn.Write([]byte("DISCONNECT")); err != nil {
			t.Fatal(err)
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-readErr; err != nil {
			t.Fatalf("the peer read %v, want a clean end of stream", err)
		}
	})

	t.Run("a peer that never closes holds Close only until the deadline", func(t *testing.T) {
		release := make(chan struct{})
		conn, leave := serve(t, func(net.Conn) { <-release })
		defer close(release)
		leave.Set(time.Now().Add(50 * time.Millisecond))
		closed := make(chan error, 1)
		go func() { closed <- conn.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return after its deadline")
		}
	})

	t.Run("a second Close does not wait again", func(t *testing.T) {
		release := make(chan struct{})
		conn, leave := serve(t, func(net.Conn) { <-release })
		defer close(release)
		leave.Set(time.Now().Add(50 * time.Millisecond))
		_ = conn.Close()
		leave.Set(time.Now().Add(time.Hour))
		start := time.Now()
		_ = conn.Close()
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("the second Close took %v", took)
		}
	})
}

func TestLeaving(t *testing.T) {
	t.Run("a nil Leaving is never leaving", func(t *testing.T) {
		var l *Leaving
		if _, ok := l.Deadline(); ok {
			t.Fatal("a nil Leaving is leaving")
		}
	})
	t.Run("Set makes it leave by the deadline, Clear stay again", func(t *testing.T) {
		var l Leaving
		by := time.Now().Add(time.Minute)
		l.Set(by)
		if d, ok := l.Deadline(); !ok || !d.Equal(time.Unix(0, by.UnixNano())) {
			t.Fatalf("Deadline() = %v, %v; want %v, true", d, ok, by)
		}
		l.Clear()
		if _, ok := l.Deadline(); ok {
			t.Fatal("leaving after Clear")
		}
	})
}
