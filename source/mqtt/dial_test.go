package mqtt

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
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
