package jetstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume/consumetest"
	"github.com/replayguard/replayguard/source/jetstream"
)

// TestATLSURLOfAPlainServerSaysTheServerDoesNotSpeakTLS: jetstream.url
// tls:// at a plain NATS listener fails each attempt; what the attempt
// says (the log, readiness, the connect_failed event) must name the cause
// and the fix, as the MQTT side and the nats output do, not nats.go's
// "secure connection not available".
func TestATLSURLOfAPlainServerSaysTheServerDoesNotSpeakTLS(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	e, _ := meters(t)
	cfg := testConfig(t, "tls://"+n.Addr())
	events := &consumetest.Events{}
	cfg.Observer = events
	c, err := jetstream.New(cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var ev source.Event
	for deadline := time.Now().Add(10 * time.Second); ; {
		var ok bool
		if ev, ok = events.Last(source.ConnectFailed); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no failed connection attempt within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if msg := ev.Err.Error(); !strings.Contains(msg, "the server does not speak TLS") || !strings.Contains(msg, "its URL would be nats://") {
		t.Fatalf("a failed attempt says %q: want that the server does not speak TLS and the URL to use", msg)
	}
}
