package failover

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/replayguard/replayguard/forward"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestFailoverUnderLoad is everything at once: `replayguard run` consumes a
// feed of more than 20,000 messages from five sources while, at random
// points of the feed, it is killed with SIGKILL several times and frozen
// with SIGSTOP once; the primary autosaves while the consumer is down, and
// a copy of that save becomes the standby's database, older than the
// acknowledgements that follow; later the consumer and the primary are
// killed, and the standby started from the copy on another port. The
// standby replays what was applied since the copy, and knows nothing of
// what the primary acknowledged to the publisher after it: those losses
// must show as gaps, never as silent holes.
//
// Every applied message is also forwarded (the forward effect) to a
// downstream broker that does not fail, where a subscriber records every
// copy; at the end a few applied messages are sent again with another
// content, conflicts that must not be forwarded. checkForward then holds
// the downstream to the audit export: every applied event received under
// its key, nothing else, byte for byte, first copies in commit order per
// source, and copies sent again only after kills: at most one page of
// the drainer's per kill, however many replays were found duplicate.
func TestFailoverUnderLoad(t *testing.T) {
	skipShort(t)
	rng := rand.New(rand.NewPCG(seed(t), 4))
	perSource, kills := 4000, 4
	if soak() {
		perSource, kills = 40000, 16
	}
	sources := sourceNames(5)
	primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	standbyPort := testbroker.FreePort(t)
	brokers := []string{primary.URL(), fmt.Sprintf("tcp://127.0.0.1:%d", standbyPort)}
	down := startDownstream(t)
	s := newSetupWith(t, brokers, setupOptions{API: true, Downstream: down.Broker.URL()})
	d := startDaemon(t, s)
	d.WaitReady()
	pub := newPublisher(t, brokers, 20)
	total := float64(perSource * len(sources))

	f := startFeeder(t, pub, sources, perSource, 3000)
	var (
		snap string
		head uint64 // audit head when the last run started
	)
	type event struct {
		at   float64 // fraction of the feed published
		what string
		do   func() string
	}
	restart := func() string {
		down := randDuration(rng, 0, 300*time.Millisecond)
		time.Sleep(down)
		d.Start()
		return fmt.Sprintf("restarted after %v", down)
	}
	kill := func() {
		d.Kill()
		head, _, _ = inspect(t, s)
	}
	snapAt := uniform(rng, 0.15, 0.3)
	events := []event{
		{snapAt, "consumer killed; the primary autosaves while it is down: the standby's copy;", func() string {
			// What the broker queues for the offline session is in the
			// copy, unsent. Mosquitto marks the first receive-maximum of
			// them in flight, and a restore sends those with DUP=1; the
			// rest the standby sends with DUP=0.
			kill()
			f.waitProgress(t, f.Attempted()+int64(s.Config.MQTT.ReceiveMaximum)+500)
			snap = primary.SnapshotDB()
			saved := lastSequences(pub)
			restarted := restart()
			// Replays are of applied messages only once the consumer has
			// caught up with the copy.
			d.WaitApplied(saved)
			return restarted
		}},
		{snapAt + uniform(rng, 0.15, 0.3), "consumer killed, primary killed; standby started from the copy;", func() string {
			// What the primary queued meanwhile was acknowledged to the
			// publisher and dies with it.
			kill()
			f.waitProgress(t, f.Attempted()+int64(200+rng.IntN(1000)))
			primary.Kill()
			gone := randDuration(rng, 0, 500*time.Millisecond)
			time.Sleep(gone)
			testbroker.StartFromSnapshotWith(t, snap, testbroker.MosquittoOptions{Port: standbyPort})
			restarted := restart()
			// The standby sends the copy's session at once. Let the
			// consumer decide all of it, the first transmissions with
			// DUP=0 among it, before a later kill turns them into resends.
			waitFor(t, "the standby's first replays", 30*time.Second, func() bool {
				return d.Metrics()["replayguard_decisions_total/duplicate"] > 0
			})
			replays := waitStable(t, "the standby's replays", 500*time.Millisecond, time.Minute, func() uint64 {
				return uint64(d.Metrics()["replayguard_decisions_total/duplicate"])
			})
			return fmt.Sprintf("standby up %v after the kill; consumer %s, found %d replays duplicate", gone, restarted, replays)
		}},
		{uniform(rng, 0.05, 0.95), "consumer frozen (SIGSTOP), its connection open;", func() string {
			stall := randDuration(rng, 200*time.Millisecond, 2*time.Second)
			d.Pause()
			time.Sleep(stall)
			d.Resume()
			return fmt.Sprintf("resumed after %v", stall)
		}},
	}
	for range kills {
		events = append(events, event{uniform(rng, 0.05, 0.95), "consumer killed;", func() string {
			kill()
			return restart()
		}})
	}
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.at, b.at) })

	for _, e := range events {
		f.waitProgress(t, int64(e.at*total))
		time.Sleep(randDuration(rng, 0, 50*time.Millisecond))
		t.Logf("%2.0f%% of the feed (%d published): %s %s", e.at*100, f.Attempted(), e.what, e.do())
	}
	f.Wait(t, 3*time.Minute)
	publishTail(t, pub, sources, 20)
	d.WaitHigh(lastSequences(pub))
	fd := feed{Pub: pub, Sources: sources}
	fd.Conflicts = sendConflicts(t, pub, nil, firstOf(sources, 3), func() float64 {
		return d.Metrics()["replayguard_decisions_total/conflict"]
	})
	waitStable(t, "the audit position", time.Second, time.Minute, d.Position)
	checkFinalRun(t, d, head)
	waitFor(t, "an empty outbox", time.Minute, func() bool { return d.Metrics()["replayguard_outbox_entries"] == 0 })
	d.Stop()

	r := verifyStoreFeed(t, openStore(t, s), fd)
	checkCLI(t, d, r)
	records := exportAudit(t, d)
	down.WaitKeys(t, appliedKeys(records))
	fw := checkForward(t, records, down.Sub.Messages(), fd)
	if bound := d.Kills * forward.MaxPagesResent * forward.DefaultBatch; fw.Surplus() > bound {
		t.Errorf("%d copies sent again after %d kills: more than the %d pages of %d the drainer may have delivered and not marked done at a kill; %d replays were found duplicate",
			fw.Surplus(), d.Kills, forward.MaxPagesResent, forward.DefaultBatch, r.Duplicates)
	}
	t.Logf("gaps: %s", r.gapsString())
	t.Logf("consumer killed %d times; %d publishes failed while no broker answered", d.Kills, f.failed.Load())
	r.checkReplays(t, true)
	if r.Lost == 0 {
		t.Error("the primary lost nothing it had acknowledged: the gaps were not exercised")
	}
	if r.Published < 20000 {
		t.Errorf("only %d messages published", r.Published)
	}
}

func uniform(rng *rand.Rand, lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }
