package forward_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// An output whose URL asks for TLS (https://, ssl://, tls://) of a server
// that speaks none fails naming the output, the URL and that the server
// does not speak TLS, not with the TLS library's words alone.
func TestAnOutputAskingTLSOfAPlainServerSaysItDoesNotSpeakTLS(t *testing.T) {
	opts := forward.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	t.Run("a webhook at an https:// URL of a plain HTTP server", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		defer srv.Close()
		wh, err := forward.NewWebhook(forward.WebhookOptions{})
		if err != nil {
			t.Fatal(err)
		}
		target := "https://" + srv.Listener.Addr().String() + "/dispatch"
		r := newRig(t, engine.ForwardSpec{Webhook: target}, map[string]forward.Output{engine.OutputWebhook: wh}, opts)
		awaitWarning(t, r, "webhook output failing", "POST "+target+": the server does not speak TLS: the webhook output's URL is https://")
	})
	t.Run("an mqtt output at an ssl:// URL of a plain broker", func(t *testing.T) {
		broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		out, err := forward.NewMQTT(forward.MQTTOptions{Brokers: []string{"ssl://" + broker.Addr()}, ClientID: testbroker.UniqueClientID("rg-out"),
			AckTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		r := newRig(t, engine.ForwardSpec{Topic: "clean/{topic}"}, map[string]forward.Output{engine.OutputMQTT: out}, opts)
		awaitWarning(t, r, "mqtt output failing", "ssl://"+broker.Addr()+": the broker closed the connection during the TLS handshake: it does not speak TLS on this port")
	})
	t.Run("a nats output at a tls:// URL of a plain server", func(t *testing.T) {
		srv := testbroker.StartNATS(t, testbroker.NATSOptions{})
		url := "tls://" + srv.Addr()
		out, err := forward.NewNATS(forward.NATSOptions{URL: url, AckTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		r := newRig(t, engine.ForwardSpec{NATS: "dispatch.{agency}.{source_id}"}, map[string]forward.Output{engine.OutputNATS: out}, opts)
		awaitWarning(t, r, "nats output failing", "nats connect "+url+" (outputs.nats.url): the server does not speak TLS")
	})
}

// awaitWarning commits one message to forward and waits for the
// drainer's warning to say each of words.
func awaitWarning(t *testing.T, r *rig, words ...string) {
	t.Helper()
	r.run()
	r.keys(context.Background(), incident("e1", 1))
	says := func(w string) bool {
		for _, s := range words {
			if !strings.Contains(w, s) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(20 * time.Second)
	for w := r.d.Status().Warning(); !says(w); w = r.d.Status().Warning() {
		if time.Now().After(deadline) {
			t.Fatalf("the output's warning %q, want it to say %q", w, words)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
