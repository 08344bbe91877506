package mqtt3

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// Under MQTT 3.1.1 too, a member leaving its share group whose commit
// takes longer than the leave's quiet still decides every message its
// session held: the broker sends no more while its in-flight window for
// the member is full of messages not acknowledged, so that silence is not
// the session's end.
func TestAMemberLeavingWithASlowCommitDecidesWhatItsSessionHeldUnder311(t *testing.T) {
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true, MaxInflight: 5})
	cfg := testConfig(t, m.URL())
	cfg.ShareGroup = "workers"
	stay := newRecorder(t)
	start(t, cfg, stay).waitReady(t)

	release := make(chan struct{})
	var asks atomic.Int32
	cfg.ClientID = testbroker.UniqueClientID("rg-leaving-slow-311")
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.BatchSize = 5
	cfg.LeaveShare = func(ctx context.Context) (bool, error) {
		asks.Add(1)
		return true, nil
	}
	leaving := newRecorder(t)
	// Its first batch waits until it has asked to leave, then commits
	// slower than the leave's quiet: a loaded store.
	leaving.Hook = func(ctx context.Context, call int, msgs []engine.Message) error {
		if call == 0 {
			<-release
			time.Sleep(consume.LeaveQuiet + consume.LeaveQuiet/2)
		}
		return nil
	}
	r := start(t, cfg, leaving)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	r.waitReady(t)

	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
	publish(t, pub, "a", 200)
	waitFor(t, "the leaving member's first batch", 10*time.Second, func() bool { return len(leaving.Calls()) > 0 })
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop() }()
	waitFor(t, "the leaving member asking to leave", 10*time.Second, func() bool { return asks.Load() > 0 })
	unblock()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	held := leaving.Len()
	t.Logf("the leaving member decided %d before it stopped, the other %d so far", held, stay.Len())
	waitFor(t, "every message decided by one member or the other", 10*time.Second, func() bool { return held+stay.Len() >= 200 })
}
