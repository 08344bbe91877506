package mqtt3

import (
	"errors"
	"testing"
)

// Every error of a SUBACK names the filter and the route that asked for
// it: one that leaves a filter without a return code as much as one that
// refuses it.
func TestEverySubackErrorNamesTheRoute(t *testing.T) {
	c := &Consumer{cfg: Config{Filters: []Filter{{Topic: "incidents/#", QoS: 1, Route: "incidents"}, {Topic: "plant/+/energy", QoS: 1, Route: "meters"}}}}
	subs := c.cfg.subscriptions()
	for _, tc := range []struct {
		name    string
		granted map[string]byte
		want    string
	}{
		{"a SUBACK without a return code for a filter names its route", map[string]byte{"incidents/#": 1},
			`mqtt3: subscription refused: "plant/+/energy" (route meters): no return code in SUBACK`},
		{"a refusal names its route", map[string]byte{"incidents/#": 1, "plant/+/energy": 0x80},
			`mqtt3: subscription refused: "plant/+/energy" (route meters): return code 0x80 (failure: denied by the broker's access control, or a filter it does not take)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.checkGranted(subs, tc.granted)
			if r == nil {
				t.Fatal("no refusal")
			}
			if r.Err.Error() != tc.want || !errors.Is(r.Err, ErrSubscribe) {
				t.Fatalf("error %q, want %q wrapping ErrSubscribe", r.Err, tc.want)
			}
		})
	}
}
