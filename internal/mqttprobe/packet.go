package mqttprobe

import (
	"bufio"
	"errors"
	"fmt"
)

// probeKeepAlive is the keepalive the probe's CONNECT announces, in
// seconds: the probe disconnects long before.
const probeKeepAlive = 10

// connectPacket encodes a CONNECT of version v with a clean session (MQTT 5:
// clean start, session expiry 0), so the probe leaves nothing behind.
func connectPacket(v Version, o Options) []byte {
	flags := byte(0x02) // clean session / clean start
	if o.Username != "" {
		flags |= 0x80
		if o.Password != "" {
			flags |= 0x40
		}
	}
	body := appendString(nil, "MQTT")
	body = append(body, byte(v), flags, 0, probeKeepAlive)
	if v == V5 {
		body = append(body, 0) // no properties: session expiry 0
	}
	body = appendString(body, o.ClientID)
	if o.Username != "" {
		body = appendString(body, o.Username)
		if o.Password != "" {
			body = appendString(body, o.Password)
		}
	}
	pkt := appendVarint([]byte{0x10}, len(body))
	return append(pkt, body...)
}

func appendString(b []byte, s string) []byte {
	b = append(b, byte(len(s)>>8), byte(len(s)))
	return append(b, s...)
}

func appendVarint(b []byte, n int) []byte {
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

// errNotConnack is a first packet that is not a CONNACK: no MQTT broker.
var errNotConnack = errors.New("the first packet is not a CONNACK")

// readConnack reads the CONNACK and returns its return (or reason) code.
func readConnack(r *bufio.Reader) (byte, error) {
	h, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	if h != 0x20 {
		return 0, fmt.Errorf("%w: header 0x%02x", errNotConnack, h)
	}
	n, err := readVarint(r)
	if err != nil {
		return 0, err
	}
	if n < 2 || n > 1<<16 {
		return 0, fmt.Errorf("%w: remaining length %d", errNotConnack, n)
	}
	// Acknowledge flags, then the code; the rest (MQTT 5 properties) is
	// not needed.
	if _, err := r.ReadByte(); err != nil {
		return 0, err
	}
	return r.ReadByte()
}

func readVarint(r *bufio.Reader) (int, error) {
	n, mul := 0, 1
	for i := 0; i < 4; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		n += int(b&0x7f) * mul
		if b&0x80 == 0 {
			return n, nil
		}
		mul *= 128
	}
	return 0, fmt.Errorf("%w: remaining length too long", errNotConnack)
}
