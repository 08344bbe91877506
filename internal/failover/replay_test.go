package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/source"
)

// TestReplayFromOlderSnapshot runs the consumer in the test process, where
// it can hold commits back, and makes the broker resume from a snapshot of
// its database taken after the messages were delivered but before their
// acknowledgements reached it (the "gated" case of BROKERS.md):
//
//  1. phase 1 is applied and acknowledged;
//  2. phase 2 is published while commits are held, so it sits in the
//     session unacknowledged, partly delivered, partly queued behind the
//     consumer's receive maximum; the snapshot is taken now; then phase 2
//     is applied and acknowledged;
//  3. phase 3 is published while commits are held again: the broker
//     acknowledges it to the publisher, the consumer holds the part the
//     broker sent it, the rest waits in the broker;
//  4. the broker dies (SIGKILL) and its successor starts from the snapshot:
//     it replays all of phase 2, already applied, and has never heard of
//     phase 3, most of which is lost;
//  5. phase 4 is published to the successor.
//
// The replays must be found duplicate (those that were only queued at the
// snapshot arrive with DUP=0), phase 3's losses must show as gaps, and
// everything else must be applied exactly once. In the test process every
// committed delivery is matched with its audit record.
func TestReplayFromOlderSnapshot(t *testing.T) {
	t.Run("a broker restarted from a snapshot older than the acks", func(t *testing.T) {
		replayFromOlderSnapshot(t, false)
	})
	t.Run("a standby on another port started from a copy of the primary's database", func(t *testing.T) {
		replayFromOlderSnapshot(t, true)
	})
}

func replayFromOlderSnapshot(t *testing.T, standby bool) {
	skipShort(t)
	sources := sourceNames(3)
	primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	brokers := []string{primary.URL()}
	var standbyPort int
	if standby {
		standbyPort = testbroker.FreePort(t)
		brokers = append(brokers, fmt.Sprintf("tcp://127.0.0.1:%d", standbyPort))
	}
	s := newSetup(t, brokers, false)
	// Phases 2 and 3 are each 1.75 times the consumer's receive maximum:
	// part of each is delivered, the rest queued behind it.
	const phase1, phase4 = 200, 200
	phase2 := s.Config.MQTT.ReceiveMaximum*7/4/len(sources) + 1
	phase3 := phase2
	g := startGuard(t, s)
	pub := newPublisher(t, brokers, 20)
	acked := func(n int) func() bool {
		return func() bool { return g.Events.Count(source.Acked) >= int64(n*len(sources)) }
	}

	publishEach(t, pub, sources, phase1)
	waitFor(t, "phase 1 acknowledged", 20*time.Second, acked(phase1))

	g.Gate.Close()
	publishEach(t, pub, sources, phase2)
	snap := primary.SnapshotDB() // phase 2 in the session, unacknowledged
	g.Gate.Open()
	waitFor(t, "phase 2 acknowledged", 20*time.Second, acked(phase1+phase2))

	g.Gate.Close()
	publishEach(t, pub, sources, phase3)
	inHand := func() int64 { return g.Events.Count(source.Received) - int64((phase1+phase2)*len(sources)) }
	waitFor(t, "phase 3 deliveries in the consumer's hands", 10*time.Second, func() bool { return inHand() > 0 })
	time.Sleep(100 * time.Millisecond) // let the broker fill its in-flight window
	primary.Kill()
	// What the dead connection delivered is all read once the count rests.
	waitStable(t, "deliveries of the dead connection", 300*time.Millisecond, 10*time.Second, func() uint64 {
		return uint64(inHand())
	})
	held := int(inHand())
	t.Logf("the consumer holds %d deliveries of phase 3", held)
	g.Gate.Open() // the deliveries in hand are committed; their acks have no connection to go to
	var via string
	if standby {
		via = testbroker.StartFromSnapshotWith(t, snap, testbroker.MosquittoOptions{Port: standbyPort}).URL()
	} else {
		primary.RestartFrom(snap)
		via = primary.URL()
	}
	publishTail(t, pub, sources, phase4)
	last := int64(phase1 + phase2 + phase3 + phase4)
	g.waitHigh(t, sources, last)
	waitStable(t, "deliveries", 500*time.Millisecond, 20*time.Second, func() uint64 {
		return uint64(g.Events.Count(source.Received))
	})
	g.stop(t)

	r := verifyStore(t, g.Store, pub, sources)
	checkDeliveries(t, g.Gate.Delivered(), r.Records)
	r.checkReplays(t, true)
	t.Logf("gaps: %s", r.gapsString())
	if r.Unacked != 0 {
		t.Errorf("%d publishes unacknowledged: every phase was published to a running broker", r.Unacked)
	}
	for _, src := range sources {
		for seq := int64(phase1 + 1); seq <= int64(phase1+phase2); seq++ {
			if k := (seqKey{src, seq}); r.DuplicatesOf[k] == 0 {
				t.Errorf("%v, applied before the broker's restore, was not replayed as a duplicate", k)
			}
		}
	}
	if want := phase2 * len(sources); r.Duplicates != want {
		t.Errorf("%d duplicates, want %d: phase 2, replayed once", r.Duplicates, want)
	}
	if r.ViaBroker[via] != r.Duplicates {
		t.Errorf("duplicates by broker %v, want all %d via %s", r.ViaBroker, r.Duplicates, via)
	}
	if want := phase3*len(sources) - held; r.Lost != want {
		t.Errorf("%d acknowledged messages lost (in gaps), want %d: phase 3 minus the deliveries in hand", r.Lost, want)
	}
	if r.Lost == 0 {
		t.Error("the broker lost nothing: the gaps were not exercised")
	}
	if ev := g.Events; ev.Count(source.Received) != ev.Count(source.Committed)+ev.Count(source.Abandoned) {
		t.Errorf("received %d deliveries, committed %d, abandoned %d", ev.Count(source.Received), ev.Count(source.Committed), ev.Count(source.Abandoned))
	}
}
