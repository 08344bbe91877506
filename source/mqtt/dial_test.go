package mqtt

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
)

func TestBufferedDialer(t *testing.T) {
	urls := func(raw ...string) []*url.URL {
		var us []*url.URL
		for _, r := range raw {
			u, err := url.Parse(r)
			if err != nil {
				t.Fatal(err)
			}
			us = append(us, u)
		}
		return us
	}

	t.Run("WebSocket brokers are left to autopaho", func(t *testing.T) {
		if bufferedDialer(urls("tcp://127.0.0.1:1883", "ws://127.0.0.1:8080/mqtt"), nil, nil) != nil {
			t.Fatal("took over a WebSocket broker")
		}
	})

	t.Run("a proxy in the environment leaves dialling to autopaho", func(t *testing.T) {
		t.Setenv("all_proxy", "socks5://127.0.0.1:1080")
		if bufferedDialer(urls("tcp://127.0.0.1:1883"), nil, nil) != nil {
			t.Fatal("took over with all_proxy set")
		}
	})

	t.Run("a TCP broker is dialled with a read buffer and a write lock", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = c.Write([]byte("hello"))
		})
		dial := bufferedDialer(urls("mqtt://"+ln.Addr().String()), nil, nil)
		if dial == nil {
			t.Fatal("no dialer for a TCP broker")
		}
		u, _ := url.Parse("mqtt://" + ln.Addr().String())
		conn, err := dial(context.Background(), autopaho.ClientConfig{ConnectTimeout: 5 * time.Second}, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, ok := conn.(sync.Locker); !ok {
			t.Error("the connection is no sync.Locker: paho's multi-call writes could interleave with a PUBACK run")
		}
		got := make([]byte, 5)
		if _, err := io.ReadFull(conn, got); err != nil || string(got) != "hello" {
			t.Fatalf("read %q, %v", got, err)
		}
	})
}

func TestBufferedConnClose(t *testing.T) {
	// serve accepts one connection and hands it to handle.
	serve := func(t *testing.T, handle func(net.Conn)) net.Conn {
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
		u, _ := url.Parse("tcp://" + ln.Addr().String())
		leave := &leaving{}
		conn, err := bufferedDialer([]*url.URL{u}, nil, leave)(context.Background(), autopaho.ClientConfig{ConnectTimeout: 5 * time.Second}, u)
		if err != nil {
			t.Fatal(err)
		}
		leave.set(time.Now().Add(5 * time.Second))
		return conn
	}

	t.Run("a leaving connection returns from Close only after the peer read everything and closed", func(t *testing.T) {
		var got atomic.Pointer[string]
		conn := serve(t, func(c net.Conn) {
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
		conn := serve(t, func(c net.Conn) {
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
		conn := serve(t, func(net.Conn) { <-release })
		defer close(release)
		conn.(*bufferedConn).leave.set(time.Now().Add(50 * time.Millisecond))
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
}
