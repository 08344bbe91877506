package mqttconn_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/replayguard/replayguard/internal/mqttconn"
)

// A consumer dials its broker with a read buffer, and before its
// DISCONNECT sets its Leaving: Close then waits for the broker to have
// read everything and closed its side.
func ExampleDialBuffered() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	read := make(chan string, 1)
	go func() {
		c, _ := ln.Accept()
		b, _ := io.ReadAll(c) // the broker reads until the client's half-close
		read <- string(b)
		c.Close()
	}()

	var leave mqttconn.Leaving
	u, _ := url.Parse("tcp://" + ln.Addr().String())
	conn, err := mqttconn.DialBuffered(context.Background(), u, nil, 5*time.Second, &leave)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = conn.Write([]byte("PUBACK DISCONNECT"))
	leave.Set(time.Now().Add(5 * time.Second))
	_ = conn.Close()
	fmt.Println("the broker had read:", <-read)
	// Output: the broker had read: PUBACK DISCONNECT
}
