package consume

import (
	"errors"
	"strings"
	"testing"
)

var errTestConfig = errors.New("test: invalid configuration")

func TestParseBroker(t *testing.T) {
	for _, c := range []struct {
		name, url string
		ok        bool
	}{
		{"a tcp broker is taken", "tcp://127.0.0.1:1883", true},
		{"a websocket broker is taken", "wss://broker.example:443/mqtt", true},
		{"an http url is refused", "http://127.0.0.1:1883", false},
		{"a url without host is refused", "tcp://", false},
		{"credentials in the url are refused", "tcp://u:p@127.0.0.1:1883", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseBroker(c.url, errTestConfig)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, errTestConfig)) {
				t.Fatalf("ParseBroker(%q) = %v", c.url, err)
			}
		})
	}
}

func TestValidFilter(t *testing.T) {
	for _, c := range []struct {
		name, topic string
		qos         byte
		ok          bool
	}{
		{"wildcards as whole levels are taken", "plant/+/energy/#", 1, true},
		{"QoS 0 is refused", "a/b", 0, false},
		{"QoS 3 is refused", "a/b", 3, false},
		{"an empty filter is refused", "", 1, false},
		{"a $share prefix is refused", "$share/g/a", 1, false},
		{"'#' before the last level is refused", "a/#/b", 1, false},
		{"'+' inside a level is refused", "a/b+/c", 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ValidFilter(c.topic, c.qos, errTestConfig)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, errTestConfig)) {
				t.Fatalf("ValidFilter(%q, %d) = %v", c.topic, c.qos, err)
			}
		})
	}
}

func TestValidSession(t *testing.T) {
	brokers, filters := []string{"tcp://127.0.0.1:1883"}, []Filter{{Topic: "plant/+/energy", QoS: 1}}
	for _, c := range []struct {
		name, want string
		brokers    []string
		id, group  string
		filters    []Filter
	}{
		{"a fixed id with brokers and filters is taken", "", brokers, "rg-1", "ops", filters},
		{"no broker is refused", "no broker", nil, "rg-1", "", filters},
		{"a bad broker is refused", "scheme must be", []string{"http://h:1"}, "rg-1", "", filters},
		{"an empty client id is refused", "empty client id", brokers, " ", "", filters},
		{"a share group of two levels is refused", "share group", brokers, "rg-1", "a/b", filters},
		{"no filter is refused", "no topic filter", brokers, "rg-1", "", nil},
		{"a QoS 0 filter is refused", "QoS 0", brokers, "rg-1", "", []Filter{{Topic: "a/#"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ValidSession(c.brokers, c.id, c.group, c.filters, errTestConfig)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !errors.Is(err, errTestConfig) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}
