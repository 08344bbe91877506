package config

import (
	"strings"
	"testing"
	"time"
)

// mqtt.adopt_lost_after is a positive duration, 45s unless set; 0, a
// negative duration or one without a unit is refused, naming the setting.
func TestAdoptLostAfterIsAPositiveDuration(t *testing.T) {
	c, err := Parse([]byte("mqtt: {client_id: rg-1}\n"), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MQTT.AdoptLostAfter != DefaultAdoptLostAfter || DefaultAdoptLostAfter != Duration(45*time.Second) {
		t.Fatalf("adopt_lost_after unset: %v, want the default 45s", c.MQTT.AdoptLostAfter)
	}
	c, err = Parse([]byte("mqtt: {client_id: rg-1, adopt_lost_after: 3s}\n"), "f.yaml", nil)
	if err != nil || c.MQTT.AdoptLostAfter != Duration(3*time.Second) {
		t.Fatalf("adopt_lost_after: 3s read as %v, %v", c.MQTT.AdoptLostAfter, err)
	}
	for _, v := range []string{"0s", "0", "-5s", "45"} {
		file := "mqtt: {client_id: rg-1, adopt_lost_after: " + v + "}\n"
		got := problemsOf(t, file)
		if len(got) != 1 || !strings.HasPrefix(got[0], "mqtt.adopt_lost_after: ") {
			t.Errorf("adopt_lost_after: %s: problems %q, want one about mqtt.adopt_lost_after", v, got)
		}
	}
	m := MQTTConfig{Brokers: []string{DefaultBroker}, Protocol: ProtocolAuto, KeepAlive: DefaultKeepAlive, BatchSize: 1, ReceiveMaximum: 1,
		AdoptLostAfter: Duration(-time.Second)}
	var ps problems
	m.check(&ps, field{"mqtt", "mqtt"})
	if len(ps.list) != 1 || ps.list[0].Path != "mqtt.adopt_lost_after" || !strings.Contains(ps.list[0].Message, "must be a positive duration") {
		t.Errorf("a negative adopt_lost_after set in code: problems %+v, want one naming it", ps.list)
	}
}
