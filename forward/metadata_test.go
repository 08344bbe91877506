package forward_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAProducersEpochCannotWedgeTheWebhookLane: a string epoch is a
// producer's text and goes out as the replayguard-epoch header. One that
// holds a line break (valid JSON, valid UTF-8) is a header value net/http
// refuses to send; the attempt fails like a connection error, so the entry
// would be retried for good and every entry after it would wait behind it.
// The message must not reach the outbox as is, and the next one must be
// delivered.
func TestAProducersEpochCannotWedgeTheWebhookLane(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(forward.HeaderSequence))
		mu.Unlock()
	}))
	defer srv.Close()
	wh, err := forward.NewWebhook(forward.WebhookOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, engine.ForwardSpec{Webhook: srv.URL}, map[string]forward.Output{engine.OutputWebhook: wh},
		forward.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Poll: 50 * time.Millisecond})
	r.run()
	ctx := context.Background()
	bad := engine.Message{Topic: "incidents/fd/e1",
		Payload: []byte(`{"agency":"fd","source_id":"e1","boot_id":"b\r\nX-Injected: 1","sequence":1}`)}
	good := engine.Message{Topic: "incidents/fd/e2",
		Payload: []byte(`{"agency":"fd","source_id":"e2","boot_id":1,"sequence":1}`)}
	out := r.process(ctx, bad, good)
	if out[0] != engine.Malformed {
		t.Errorf("the message whose epoch holds a line break is %v, want malformed", out[0])
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		n, _ := r.store.OutboxDepth(ctx, "")
		t.Fatalf("outcomes %v: nothing delivered in 3 s, %d entries wait behind the one whose epoch holds a line break", out, n)
	}
}

// TestAProducersSourceCannotWedgeTheMQTTLane: a source part holding U+007F
// (valid JSON, valid UTF-8, left as is by the JSON array of
// replayguard-source) is a user property a broker answers by closing the
// connection (MQTT 5 section 1.5.4), at every attempt. The entries after it
// must still be delivered.
func TestAProducersSourceCannotWedgeTheMQTTLane(t *testing.T) {
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	sub := testbroker.NewSubscriber(t, []string{broker.URL()}, "clean/#")
	r := newRig(t, engine.ForwardSpec{Topic: "clean/{topic}"}, map[string]forward.Output{engine.OutputMQTT: mqttOutput(t, broker, 16)},
		forward.Options{Batch: 50, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	r.run()
	ctx := context.Background()
	bad := engine.Message{Topic: "incidents/fd/e1",
		Payload: []byte(`{"agency":"fd","source_id":"e\u007f1","boot_id":1,"sequence":1}`)}
	out := r.process(ctx, bad, incident("e2", 1))
	if out[0] != engine.Malformed {
		t.Errorf("the message whose source holds U+007F is %v, want malformed", out[0])
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && len(sub.Messages()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if len(sub.Messages()) == 0 {
		n, _ := r.store.OutboxDepth(ctx, "")
		t.Fatalf("outcomes %v: nothing delivered in 3 s, %d entries wait behind the one whose source holds U+007F", out, n)
	}
}
