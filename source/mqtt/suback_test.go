package mqtt

import (
	"errors"
	"testing"

	"github.com/eclipse/paho.golang/paho"
)

// Every error of a SUBACK names the filter and the route that asked for
// it: one that leaves a filter without a reason code as much as one that
// refuses it, in a share group too.
func TestEverySubackErrorNamesTheRoute(t *testing.T) {
	filters := []Filter{{Topic: "incidents/#", QoS: 1, Route: "incidents"}, {Topic: "plant/+/energy", QoS: 1, Route: "meters"}}
	for _, tc := range []struct {
		name, group string
		reasons     []byte
		want        string
	}{
		{"a SUBACK without a reason code for a filter names its route", "", []byte{0x01},
			`mqtt: subscription refused: "plant/+/energy" (route meters): no reason code in SUBACK`},
		{"a refusal names its route and why", "", []byte{0x01, 0x87},
			`mqtt: subscription refused: "plant/+/energy" (route meters): reason code 0x87 (not authorized)`},
		{"a share group's SUBACK without a reason code names the route", "workers", []byte{},
			`mqtt: subscription refused: "$share/workers/incidents/#" (route incidents): no reason code in SUBACK` + "\n" +
				`mqtt: subscription refused: "$share/workers/plant/+/energy" (route meters): no reason code in SUBACK`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Consumer{cfg: Config{Filters: filters, ShareGroup: tc.group}}
			r := c.checkSuback(c.subscribePacket(), &paho.Suback{Reasons: tc.reasons})
			if r == nil {
				t.Fatal("no refusal")
			}
			if r.Err.Error() != tc.want || !errors.Is(r.Err, ErrSubscribe) {
				t.Fatalf("error %q, want %q wrapping ErrSubscribe", r.Err, tc.want)
			}
		})
	}
}
