//go:build !linux

package mqttconn

import "net"

// QuickAck does nothing where the kernel has no TCP_QUICKACK: the broker's
// PUBACKs then wait for the delayed-acknowledgement timer as they would.
func QuickAck(net.Conn) {}
