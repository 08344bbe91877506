package mqtt_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// A member stopping whose connection is lost and regained while the store
// grants it leave does not record, on the new connection's grant, that it
// holds the group's subscription again: it unsubscribes and stops, and a
// member counting on it would leave the group's messages to nobody.
func TestAMemberGrantedLeaveDuringAReconnectIsNotRecordedInTheGroupAgain(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	var mu sync.Mutex
	held, joins := false, 0
	joined := make(chan struct{}, 8)
	asking, answer := make(chan struct{}), make(chan struct{})
	cfg := testConfig(t, m.URL())
	cfg.ShareGroup = "workers"
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.JoinShare = func(context.Context) error {
		mu.Lock()
		held, joins = true, joins+1
		mu.Unlock()
		joined <- struct{}{}
		return nil
	}
	cfg.QuitShare = func(context.Context) error {
		mu.Lock()
		held = false
		mu.Unlock()
		return nil
	}
	// The store grants leave at once, as another member holds the
	// subscription; its answer reaches the member later.
	cfg.LeaveShare = func(context.Context) (bool, error) {
		mu.Lock()
		held = false
		mu.Unlock()
		close(asking)
		<-answer
		return true, nil
	}
	r := start(t, cfg, newRecorder(t))
	r.waitReady(t)
	<-joined
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop() }()
	<-asking
	m.Restart()
	// The new connection subscribes; its grant is recorded while the
	// answer is on its way, or waits for it: nothing tells the second
	// apart from a grant not come yet, so it is given a moment.
	select {
	case <-joined:
	case <-time.After(3 * time.Second):
	}
	close(answer)
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if held {
		t.Fatalf("after %d joins, the store records that the stopped member, granted leave, holds the group's subscription", joins)
	}
}
