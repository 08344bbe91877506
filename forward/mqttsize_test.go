package forward

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/replayguard/replayguard/engine"
)

// TestPublishSizeIsTheEncodedPacketsSize compares publishSize with the
// bytes paho writes for the same PUBLISH, across the lengths where the
// variable byte integers grow.
func TestPublishSizeIsTheEncodedPacketsSize(t *testing.T) {
	for _, payload := range []int{0, 1, 60, 127, 128, 16_000, 16_383, 16_384, 200_000, 2_097_151, 2_097_152} {
		for _, seq := range []int64{-1, 7} {
			e := engine.OutboxEntry{Key: engine.Hash{1}, Route: "meters", Source: []string{"plant", "m\"3"}, Epoch: "b1",
				Sequence: seq, Target: "clean/plant/m3/energy", Payload: bytes.Repeat([]byte("x"), payload)}
			if seq < 0 {
				e.Epoch = ""
			}
			var user paho.UserProperties
			for _, p := range Properties(e) {
				user = append(user, paho.UserProperty{Key: p.Name, Value: p.Value})
			}
			p := &paho.Publish{QoS: 1, PacketID: 1, Topic: e.Target, Payload: e.Payload, Properties: &paho.PublishProperties{User: user}}
			var b strings.Builder
			n, err := p.Packet().ToControlPacket().WriteTo(&b)
			if err != nil {
				t.Fatal(err)
			}
			if got := publishSize(e); got != int(n) {
				t.Fatalf("payload %d bytes, sequence %d: publishSize %d, paho writes %d", payload, seq, got, n)
			}
		}
	}
}
