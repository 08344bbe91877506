package consumetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Member is a consumer of a share group run in the background.
type Member struct {
	Ready func() bool
	Stop  func() error // cancels its Run and returns what Run returned
}

// LeaveShare is the scenario of a member that stops with leave granted,
// run against each MQTT source: it first decides every message its
// session held at that moment (dealt to it, not yet delivered), and the
// broker deals the group's later messages to the member still running:
// none waits in the stopped member's session. The broker is the test's,
// with no persistence.
type LeaveShare struct {
	// Start runs a member of the share group "workers", deciding through
	// rec, until the end of the test: the member that stays when leave is
	// nil; else the member that leaves, under a client id of its own, its
	// LeaveShare answered by leave, with a batch size of 5, a shutdown
	// timeout of 10s, and no more than 5 messages in flight to it at a
	// time (the broker's max_inflight_messages, or its receive maximum).
	Start func(t *testing.T, rec *Recorder, leave func(context.Context) (bool, error)) Member
	// Publish publishes n messages of source, sequenced from 1, and fails
	// the test unless the broker acknowledged every one.
	Publish func(t *testing.T, source string, n int)
	// FirstCommit is how long the leaving member's first batch takes once
	// it has asked to leave: a loaded store. Longer than the leave's quiet,
	// the member must still decide every message its session held, for the
	// broker sends nothing while the member's window is full of messages
	// it has not acknowledged, and that silence is not the session's end.
	FirstCommit time.Duration
}

// Run runs the scenario.
func (s LeaveShare) Run(t *testing.T) {
	t.Helper()
	stay := NewRecorder(t)
	WaitFor(t, "consumer ready", 10*time.Second, s.Start(t, stay, nil).Ready)

	release := make(chan struct{})
	var asks atomic.Int32
	leave := func(ctx context.Context) (bool, error) {
		asks.Add(1)
		return true, nil
	}
	leaving := NewRecorder(t)
	// Its first batch waits until it has asked to leave: with no more
	// than 5 in flight to it, the rest of its share queues in its session
	// at the broker meanwhile. Then it takes FirstCommit.
	leaving.Hook = func(ctx context.Context, call int, msgs []engine.Message) error {
		if call == 0 {
			<-release
			time.Sleep(s.FirstCommit)
		}
		return nil
	}
	r := s.Start(t, leaving, leave)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // before the run is stopped at the end, if the test fails first
	WaitFor(t, "consumer ready", 10*time.Second, r.Ready)

	s.Publish(t, "a", 200) // dealt between the two sessions once acknowledged
	WaitFor(t, "the leaving member's first batch", 10*time.Second, func() bool { return len(leaving.Calls()) > 0 })
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop() }()
	WaitFor(t, "the leaving member asking to leave", 10*time.Second, func() bool { return asks.Load() > 0 })
	unblock()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	held := leaving.Len()
	t.Logf("the leaving member decided %d before it stopped, the other %d so far", held, stay.Len())
	WaitFor(t, "every message decided by one member or the other", 10*time.Second, func() bool { return held+stay.Len() >= 200 })
	if got := leaving.Len(); got != held {
		t.Fatalf("the leaving member decided %d after it stopped", got-held)
	}
	for _, k := range Seqs("a", 1, 200) {
		if n := leaving.Count(k) + stay.Count(k); n != 1 {
			t.Errorf("%v decided %d times, want once", k, n)
		}
	}

	s.Publish(t, "b", 100)
	WaitFor(t, "the member still running deciding every later message", 10*time.Second, func() bool {
		for _, k := range Seqs("b", 1, 100) {
			if stay.Count(k) != 1 {
				return false
			}
		}
		return true
	})
}
