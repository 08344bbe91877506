package forward_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestOutputErrorsNameTheSettingToLookAt: a receiver slower than the
// webhook's timeout, and a NATS server or an MQTT broker that cannot be
// reached, fail with an error (the log's, /readyz's) that names the
// setting an operator changes.
func TestOutputErrorsNameTheSettingToLookAt(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer func() { close(release); slow.Close() }()
	wh, err := forward.NewWebhook(forward.WebhookOptions{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	nats, err := forward.NewNATS(forward.NATSOptions{URL: fmt.Sprintf("nats://127.0.0.1:%d", testbroker.FreePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer nats.Close()
	mqtt, err := forward.NewMQTT(forward.MQTTOptions{Brokers: []string{fmt.Sprintf("tcp://127.0.0.1:%d", testbroker.FreePort(t))},
		ClientID: "rg-out", ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mqtt.Close()
	for _, tc := range []struct {
		name    string
		out     forward.Output
		target  string
		setting string
	}{
		{"a receiver slower than the timeout", wh, slow.URL, "(outputs.webhook.timeout)"},
		{"a NATS server down", nats, "clean.s", "(outputs.nats.url)"},
		{"an MQTT broker down", mqtt, "clean/s", "(outputs.mqtt.brokers, by default the consumer's)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.out.Deliver(t.Context(), []engine.OutboxEntry{{ID: 1, Target: tc.target, Payload: []byte(`{}`)}})
			if err == nil || !strings.Contains(err.Error(), tc.setting) {
				t.Errorf("Deliver: %v; want an error naming %s", err, tc.setting)
			}
		})
	}
}
