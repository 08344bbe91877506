package forward

import (
	"fmt"

	"github.com/replayguard/replayguard/engine"
)

// publishSize is the size in bytes of the QoS 1 PUBLISH that carries e, as
// MQTT 5 counts it against a broker's Maximum Packet Size (§3.1.2.11.4):
// the whole packet, fixed header included.
func publishSize(e engine.OutboxEntry) int {
	props := 0
	for _, p := range Properties(e) {
		props += 1 + 2 + len(p.Name) + 2 + len(p.Value) // identifier, two UTF-8 strings
	}
	rest := 2 + len(e.Target) + 2 + varintSize(props) + props + len(e.Payload) // topic, packet id, properties, payload
	return 1 + varintSize(rest) + rest
}

// varintSize is the length of n as an MQTT variable byte integer.
func varintSize(n int) int {
	size := 1
	for n >= 128 {
		n >>= 7
		size++
	}
	return size
}

// tooLarge is the refusal of an entry whose copy the broker said it would
// not take: it holds the entry for an operator instead of sending a packet
// the broker answers by closing the connection, again and again.
func tooLarge(e engine.OutboxEntry, size int, limit uint32, broker string, i int) *RefusedError {
	return &RefusedError{Index: i, Reason: fmt.Sprintf(
		"mqtt copy for topic %q is %d bytes with its replayguard-* properties, over the Maximum Packet Size %d of broker %s",
		e.Target, size, limit, broker)}
}
