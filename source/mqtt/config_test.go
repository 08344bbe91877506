package mqtt_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source/mqtt"
)

type nopProcessor struct{}

func (nopProcessor) Process(context.Context, []engine.Message) ([]engine.Decision, error) {
	return nil, nil
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestNew(t *testing.T) {
	valid := func() mqtt.Config {
		return mqtt.Config{
			Brokers:  []string{"tcp://127.0.0.1:1883"},
			ClientID: "replayguard-1",
			Filters:  []mqtt.Filter{{Topic: "incidents/#", QoS: 1}},
		}
	}
	tests := []struct {
		name   string
		change func(*mqtt.Config)
		ok     bool
	}{
		{"a complete configuration is accepted", func(*mqtt.Config) {}, true},
		{"several brokers and schemes are accepted", func(c *mqtt.Config) {
			c.Brokers = []string{"mqtt://a:1883", "ssl://b:8883", "mqtts://c", "ws://d/mqtt", "wss://e/mqtt", "tls://f:8883"}
		}, true},
		{"QoS 2 filters are accepted", func(c *mqtt.Config) { c.Filters[0].QoS = 2 }, true},
		{"a share group is accepted", func(c *mqtt.Config) { c.ShareGroup = "replayguard" }, true},
		{"filters with + and # levels are accepted", func(c *mqtt.Config) { c.Filters[0].Topic = "plant/+/energy/#" }, true},
		{"an empty client id is refused", func(c *mqtt.Config) { c.ClientID = "" }, false},
		{"a blank client id is refused", func(c *mqtt.Config) { c.ClientID = "  " }, false},
		{"no broker is refused", func(c *mqtt.Config) { c.Brokers = nil }, false},
		{"an unknown scheme is refused", func(c *mqtt.Config) { c.Brokers = []string{"http://a:1883"} }, false},
		{"a broker without host is refused", func(c *mqtt.Config) { c.Brokers = []string{"tcp://"} }, false},
		{"credentials in a broker URL are refused", func(c *mqtt.Config) { c.Brokers = []string{"tcp://u:secret@a:1883"} }, false},
		{"no filter is refused", func(c *mqtt.Config) { c.Filters = nil }, false},
		{"a QoS 0 filter is refused", func(c *mqtt.Config) { c.Filters[0].QoS = 0 }, false},
		{"QoS 3 is refused", func(c *mqtt.Config) { c.Filters[0].QoS = 3 }, false},
		{"an empty filter is refused", func(c *mqtt.Config) { c.Filters[0].Topic = "" }, false},
		{"# inside a level is refused", func(c *mqtt.Config) { c.Filters[0].Topic = "a/b#" }, false},
		{"# before the last level is refused", func(c *mqtt.Config) { c.Filters[0].Topic = "a/#/b" }, false},
		{"+ inside a level is refused", func(c *mqtt.Config) { c.Filters[0].Topic = "a/b+/c" }, false},
		{"a $share prefix in the filter is refused", func(c *mqtt.Config) { c.Filters[0].Topic = "$share/g/a" }, false},
		{"a share group with / is refused", func(c *mqtt.Config) { c.ShareGroup = "a/b" }, false},
		{"a batch larger than the receive maximum is refused", func(c *mqtt.Config) {
			c.BatchSize, c.ReceiveMaximum = 100, 10
		}, false},
		{"a retry maximum below its minimum is refused", func(c *mqtt.Config) {
			c.ConnectRetryMin, c.ConnectRetryMax = time.Second, time.Millisecond
		}, false},
		{"a session expiry over 2^32-1 s is refused", func(c *mqtt.Config) { c.SessionExpiry = 1 << 32 * time.Second }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.change(&cfg)
			_, err := mqtt.New(cfg, nopProcessor{})
			if tt.ok && err != nil {
				t.Fatalf("New: %v", err)
			}
			if !tt.ok && !errors.Is(err, mqtt.ErrConfig) {
				t.Fatalf("New = %v, want ErrConfig", err)
			}
		})
	}
	t.Run("a nil processor is refused", func(t *testing.T) {
		if _, err := mqtt.New(valid(), nil); !errors.Is(err, mqtt.ErrConfig) {
			t.Fatalf("New = %v, want ErrConfig", err)
		}
	})
	t.Run("a large batch size raises the default receive maximum", func(t *testing.T) {
		cfg := valid()
		cfg.BatchSize = 2000
		if _, err := mqtt.New(cfg, nopProcessor{}); err != nil {
			t.Fatal(err)
		}
	})
}
