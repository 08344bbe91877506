package testbroker_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestPublisherWill(t *testing.T) {
	t.Run("a dropped connection makes the broker publish the Will; a closed one does not", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
		sub := testbroker.NewSubscriber(t, []string{m.URL()}, "will/#")
		will := func(topic string) testbroker.PublisherOptions {
			return testbroker.PublisherOptions{Will: &testbroker.Will{Topic: topic, Payload: []byte("gone"), QoS: 1}}
		}
		closed := testbroker.NewPublisher(t, []string{m.URL()}, will("will/closed"))
		dropped := testbroker.NewPublisher(t, []string{m.URL()}, will("will/dropped"))
		closed.Close()
		dropped.Drop()
		deadline := time.Now().Add(10 * time.Second)
		for len(sub.Messages()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		// A marker from a connection opened after both ended: a Will of
		// the closed publisher would have been published before it.
		marker := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
		if !marker.Send(context.Background(), "will/marker", []byte("end")) {
			t.Fatal("marker not acknowledged")
		}
		for len(sub.Messages()) < 2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		var topics []string
		for _, r := range sub.Messages() {
			topics = append(topics, r.Topic)
		}
		if len(topics) != 2 || topics[0] != "will/dropped" || topics[1] != "will/marker" {
			t.Fatalf("received %v, want [will/dropped will/marker]", topics)
		}
		if dropped.Send(context.Background(), "will/after", nil) {
			t.Error("a dropped publisher still publishes")
		}
	})
}
