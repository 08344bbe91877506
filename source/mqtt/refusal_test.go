package mqtt_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// After a Run's first grant, a refusal on a later connection (a standby
// without the session and that grants QoS 0 only) is not the Run's
// first subscription: Run goes on, not ready, and tries again.
func TestARefusalAfterAFailoverDoesNotEndRun(t *testing.T) {
	a := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
	b := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true, Extra: []string{"max_qos 0"}})
	r := start(t, testConfig(t, a.URL(), b.URL()), newRecorder(t))
	r.waitReady(t)
	a.Kill()
	select {
	case <-r.run.Done():
		t.Fatalf("Run ended after a failover to a standby that refused the subscription: %v", r.run.Err())
	case <-time.After(3 * time.Second):
	}
	if r.Ready() {
		t.Fatal("ready without a subscription")
	}
}
