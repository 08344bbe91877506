package mqttconn

import (
	"crypto/tls"
	"net"
	"syscall"
)

// QuickAck has the kernel acknowledge the next segments the broker sends
// at once, not after the delayed-acknowledgement timer (up to 40 ms).
// A client that writes nothing while it waits for PUBACKs calls it: a
// broker with Nagle's algorithm on (Mosquitto's default, set_tcp_nodelay
// false) holds every PUBACK after the first until the first is
// acknowledged, and with nothing written the acknowledgement waits for the
// timer. The kernel leaves quick mode on its own, so a waiter calls it
// each time it waits. conn is the TCP connection or the TLS one over it
// (a Conn's own Conn, not the Conn); on anything else it does nothing.
func QuickAck(conn net.Conn) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}
