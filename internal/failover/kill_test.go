package failover

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestConsumerKilled kills `replayguard run` with SIGKILL at random moments
// of a steady feed, at least five times and until a kill has landed between
// a commit and its acknowledgements (the broker then replays what was
// applied), and starts it again each time on the same store and session.
// The broker never fails, so nothing may be lost: every acknowledged
// message applied exactly once, no gap.
func TestConsumerKilled(t *testing.T) {
	skipShort(t)
	// Hold each committed batch 20 ms before its acknowledgements, so that
	// kills land between commit and ack often enough to prove the replay.
	t.Setenv("REPLAYGUARD_FAILPOINT_BEFORE_ACK", "20ms")
	rng := rand.New(rand.NewPCG(seed(t), 3))
	const minKills, maxKills = 5, 15
	sources := sourceNames(3)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	s := newSetup(t, []string{broker.URL()}, true)
	d := startDaemon(t, s)
	d.WaitReady()
	pub := newPublisher(t, []string{broker.URL()}, 20)
	f := startFeeder(t, pub, sources, 0, 2000)

	var head uint64
	for dups := 0; d.Kills < minKills || (dups == 0 && d.Kills < maxKills); {
		wait := randDuration(rng, 200*time.Millisecond, 1200*time.Millisecond)
		time.Sleep(wait)
		d.Kill()
		var recs int
		head, recs, dups = inspect(t, s)
		down := randDuration(rng, 0, 300*time.Millisecond)
		t.Logf("kill %d, %v after the start: %d published, %d audit records, %d duplicates so far; down for %v",
			d.Kills, wait, f.Attempted(), recs, dups, down)
		time.Sleep(down)
		d.Start()
	}
	time.Sleep(randDuration(rng, 300*time.Millisecond, time.Second)) // the last run takes load too
	f.Stop()
	publishTail(t, pub, sources, 20)
	d.WaitHigh(lastSequences(pub))
	waitStable(t, "the audit position", time.Second, 30*time.Second, d.Position)
	checkFinalRun(t, d, head)
	d.Stop()

	r := verifyStore(t, openStore(t, s), pub, sources)
	checkCLI(t, d, r)
	r.checkReplays(t, false)
	if r.Unacked != 0 || r.Lost != 0 || r.GapSeqs != 0 {
		t.Errorf("the broker never failed, yet %d publishes unacknowledged, %d lost, %d gap sequences (%s)",
			r.Unacked, r.Lost, r.GapSeqs, r.gapsString())
	}
}

// inspect opens a killed daemon's store as the kill left it, verifies its
// audit chain, and returns its head position, the records and the
// duplicates among them.
func inspect(t testing.TB, s *setup) (head uint64, records, duplicates int) {
	t.Helper()
	ctx := context.Background()
	st, err := app.OpenStore(s.Config.Store, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	snap, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := audit.Verify(ctx, st, snap.AuditHead); err != nil {
		t.Fatalf("audit chain broken by a kill, after %d records: %v", n, err)
	}
	err = st.ScanAudit(ctx, 1, func(r engine.AuditRecord) error {
		records++
		if r.Outcome == engine.Duplicate.String() {
			duplicates++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap.AuditHead.Position, records, duplicates
}

// lastSequences returns the highest sequence published of every source.
func lastSequences(pub *testbroker.Publisher) map[string]int64 {
	out := map[string]int64{}
	for _, m := range pub.All() {
		out[m.Source] = max(out[m.Source], m.Sequence)
	}
	return out
}

func randDuration(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
