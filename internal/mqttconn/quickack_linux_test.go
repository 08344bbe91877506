package mqttconn

import (
	"crypto/tls"
	"net"
	"syscall"
	"testing"
)

func quickAckOf(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	v := -1
	if err := raw.Control(func(fd uintptr) {
		v, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK)
	}); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestQuickAckSetsTheOptionOnTCPAndTLSOverIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, wrap := range []struct {
		name string
		of   func(net.Conn) net.Conn
	}{
		{"tcp", func(c net.Conn) net.Conn { return c }},
		{"tls", func(c net.Conn) net.Conn { return tls.Client(c, &tls.Config{InsecureSkipVerify: true}) }},
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		peer, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		// An exchange puts the connection in the kernel's interactive mode,
		// which delays acknowledgements: TCP_QUICKACK reads 0 then.
		buf := make([]byte, 1)
		for range 3 {
			peer.Write([]byte("p"))
			c.Read(buf)
			c.Write([]byte("c"))
			peer.Read(buf)
		}
		if v := quickAckOf(t, c.(*net.TCPConn)); v != 0 {
			t.Fatalf("%s: TCP_QUICKACK is %d after an exchange, want 0 (delayed acknowledgements)", wrap.name, v)
		}
		QuickAck(wrap.of(c))
		if v := quickAckOf(t, c.(*net.TCPConn)); v != 1 {
			t.Errorf("%s: TCP_QUICKACK is %d after QuickAck, want 1", wrap.name, v)
		}
		c.Close()
		peer.Close()
	}
	QuickAck(&Conn{}) // not a TCP connection: nothing, and no panic
}
