package jetstream_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/jetstream"
)

// A durable consumer deleted while the connection is down (here: the
// server restarted on its store without the consumer's state, the stream
// kept) ends Run with ErrConsumerDeleted as soon as the connection is back,
// not after two heartbeats missed (30s) of pulls nobody answers while
// Ready says yes: nats-server (2.9) neither answers a pull for a consumer
// it lacks nor says it has no responders, its JetStream API taking the
// request.
func TestConsumerDeletedWhileDisconnectedEndsRunOnReconnect(t *testing.T) {
	n := testbroker.StartNATS(t, testbroker.NATSOptions{})
	n.CreateStream(testStream, "plant.>")
	e, _ := meters(t)
	c, err := jetstream.New(testConfig(t, n.URL()), e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "ready", 10*time.Second, c.Ready)
	n.Stop()
	obs, err := filepath.Glob(filepath.Join(n.Dir(), "jetstream", "jetstream", "*", "streams", testStream, "obs", testConsumer))
	if err != nil || len(obs) != 1 {
		t.Fatalf("the consumer's state in the store: %v %v", obs, err)
	}
	if err := os.RemoveAll(obs[0]); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	back := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, jetstream.ErrConsumerDeleted) {
			t.Fatalf("Run = %v, want ErrConsumerDeleted", err)
		}
		t.Logf("Run ended %v after the restart: %v", time.Since(back).Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Errorf("Run still pulling 10s after the restart from a consumer the server no longer has; Ready %v", c.Ready())
		cancel()
		<-done
	}
}
