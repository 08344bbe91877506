package failover

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/sparkplug"
)

// The Sparkplug route under test: edge m1 of group plant is a meter whose
// NDATA carry the energy used since the last report (Energy, summed) and a
// temperature (Temperature, last writer wins).
const (
	spGroup, spNode = "plant", "m1"
	spEntity        = "meter/" + spNode
	// spRoute is the Sparkplug route of spGroup's edges.
	spRoute = `  - name: ` + spRouteName + `
    kind: sparkplug
    topic: "spBv1.0/` + spGroup + `/#"
    effects:
      - entity: "meter/{topic[3]}"
        add: {kwh: metrics.Energy}
        set: {temperature: metrics.Temperature}
`
	spRouteName = "plant"
	spConfig    = `store: {kind: embedded, path: %q}
window: {ttl: 2h, max_entries: 1000000, sequence_span: 4096}
routes:
` + spRoute + `mqtt:
  brokers: [%s]
  client_id: %s
  session_expiry: 1h
http: {listen: %q}
`
)

// The birth certificates of the two sessions: the second swaps the
// aliases, so a replay of the first session read with the second's table
// would add temperatures to the energy.
var (
	spFirstBirth = []sparkplug.Metric{
		{Name: "Energy", Alias: 1, Datatype: sparkplug.Double, Value: 0.0},
		{Name: "Temperature", Alias: 2, Datatype: sparkplug.Int32, Value: int64(20)},
	}
	spSecondBirth = []sparkplug.Metric{
		{Name: "Energy", Alias: 2, Datatype: sparkplug.Double, Value: 0.0},
		{Name: "Temperature", Alias: 1, Datatype: sparkplug.Int32, Value: int64(21)},
	}
)

// TestSparkplugThroughFailures runs a Sparkplug B edge node through
// `replayguard run` on a real Mosquitto and fails everything around it:
//
//  1. session 1 (bdSeq 255): NBIRTH, then NDATA whose seq crosses 255 → 0,
//     with copies of messages from before the wrap and from both sides of
//     it republished after it, while the consumer is frozen; the broker
//     saves, is killed with SIGKILL and restarted from its file, and sends
//     again every delivery the consumer committed but could not
//     acknowledge;
//  2. the edge's connection died with the broker: session 2 (bdSeq 0, the
//     bdSeq wrapping too) has a new NBIRTH whose alias table maps each
//     alias to the other metric, seq restarts at 0, and the old session is
//     replayed after it (its data from both sides of the wrap, its birth);
//  3. `replayguard run` is killed with SIGKILL during session 2's feed,
//     with every batch held between its commit and its acknowledgements,
//     until a kill has landed there; then both sessions are replayed to
//     the consumer started again on its store;
//  4. the edge's connection is dropped: the broker publishes its Will, the
//     NDEATH.
//
// Every message the broker acknowledged must be applied exactly once,
// every copy and every redelivery be a duplicate (and both must have
// happened), the meter's kWh equal the edge's sum exactly, its temperature
// the last one sent, the audit chain verify, and `sources` show the edge
// online in session 256 after the rebirth and offline after its death.
func TestSparkplugThroughFailures(t *testing.T) {
	skipShort(t)
	t.Setenv("REPLAYGUARD_FAILPOINT_BEFORE_ACK", "20ms")
	rng := rand.New(rand.NewPCG(seed(t), 11))
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	s := newSparkplugSetup(t, broker.URL())
	d := startDaemon(t, s)
	d.WaitReady()
	e := newSpEdge(t, []string{broker.URL()}, spGroup, spNode, 255)

	sessionAcrossTheWrap(t, d, broker, e)
	rebirthWithNewAliases(t, d, e)
	head := killConsumerDuringFeed(t, d, s, e, rng)

	e.drop() // the broker publishes the NDEATH
	waitFor(t, "the edge offline after its Will", 20*time.Second, func() bool {
		r, ok := spReport(d)
		return ok && r.Sparkplug != nil && !r.Sparkplug.Online
	})
	waitStable(t, "the audit position", time.Second, 30*time.Second, d.Position)
	checkFinalRun(t, d, head)
	d.Stop()
	verifySparkplug(t, d, s, e)
}

// sessionAcrossTheWrap is step 1: session 1 to seq 300 (raw 44 after the
// wrap) through a broker crash and restart.
func sessionAcrossTheWrap(t *testing.T, d *daemon, broker *testbroker.Mosquitto, e *spEdge) {
	t.Helper()
	e.connect()
	e.birth(spFirstBirth)
	sendData(t, e, 240)
	waitSpHigh(t, d, "255", 240)
	e.replay(e.between("255", 225, 240)) // before the wrap, before it
	reconnects := d.Metrics()["replayguard_reconnects_total"]
	d.Pause()                            // deliveries pile up unacknowledged
	sendData(t, e, 60)                   // seq 241 … 255, 0 … 44
	e.replay(e.between("255", 248, 264)) // raw 248 … 255 and 0 … 8, after the wrap
	broker.SnapshotDB()                  // a save after every PUBACK the edge got
	broker.Kill()
	e.end()
	d.Resume() // commits what it holds; the acknowledgements have no connection
	waitStable(t, "deliveries of the dead connection", 500*time.Millisecond, 20*time.Second, func() uint64 {
		return uint64(d.Metrics()["replayguard_received_total"])
	})
	broker.Restart()
	waitFor(t, "the consumer's reconnect", time.Minute, func() bool {
		return d.Metrics()["replayguard_reconnects_total"] > reconnects
	})
	waitSpHigh(t, d, "255", 300)
	waitStable(t, "the audit position", time.Second, 30*time.Second, d.Position)
	_, copies := e.Copies()
	dups := d.Metrics()["replayguard_decisions_total/duplicate"]
	t.Logf("session 1: %d messages, %d copies, %.0f duplicates", len(e.Sent()), copies, dups)
	if dups <= float64(copies) {
		t.Fatalf("%.0f duplicates for %d copies: the restarted broker sent nothing again", dups, copies)
	}
}

// rebirthWithNewAliases is step 2: session 2's birth, data, and the old
// session's replays.
func rebirthWithNewAliases(t *testing.T, d *daemon, e *spEdge) {
	t.Helper()
	e.connect()
	e.birth(spSecondBirth)
	sendData(t, e, 100)
	waitSpHigh(t, d, "256", 100)
	checkSession(t, d, true)
	old := e.between("255", 0, 0) // the old birth
	old = append(old, e.between("255", 250, 258)...)
	old = append(old, e.between("255", 290, 300)...)
	_, before := e.Copies()
	dups := d.Metrics()["replayguard_decisions_total/duplicate"]
	e.replay(old)
	waitFor(t, "the old session's copies decided", 20*time.Second, func() bool {
		return d.Metrics()["replayguard_decisions_total/duplicate"] >= dups+float64(len(old))
	})
	if _, after := e.Copies(); after != before+len(old) {
		t.Fatalf("copies %d → %d, want %d more", before, after, len(old))
	}
}

// killConsumerDuringFeed is step 3. It returns the audit head position at
// the last start.
func killConsumerDuringFeed(t *testing.T, d *daemon, s *setup, e *spEdge, rng *rand.Rand) uint64 {
	t.Helper()
	const minKills, maxKills = 3, 12
	before := d.Metrics()["replayguard_decisions_total/duplicate"] // the first run's: every one so far
	f := startSpFeeder(t, e)
	var head uint64
	for dups := 0; d.Kills < minKills || (dups <= int(before) && d.Kills < maxKills); {
		wait := randDuration(rng, 300*time.Millisecond, 900*time.Millisecond)
		time.Sleep(wait)
		d.Kill()
		head, _, dups = inspect(t, s)
		down := randDuration(rng, 0, 300*time.Millisecond)
		t.Logf("kill %d, %v after the start: %d duplicates (%0.f before the kills); down for %v", d.Kills, wait, dups, before, down)
		time.Sleep(down)
		d.Start()
	}
	time.Sleep(randDuration(rng, 300*time.Millisecond, time.Second)) // the last run takes load too
	f.stop()
	last := e.Sent()[len(e.Sent())-1].Seq
	waitSpHigh(t, d, "256", last)
	// Replays of both sessions to a consumer started again on its store:
	// the windows, keys and the old birth's alias table were kept.
	again := append(e.between("255", 296, 300), e.between("256", 1, 5)...)
	dups := d.Metrics()["replayguard_decisions_total/duplicate"]
	e.replay(again)
	waitFor(t, "the replays after the restarts decided", 20*time.Second, func() bool {
		return d.Metrics()["replayguard_decisions_total/duplicate"] >= dups+float64(len(again))
	})
	waitStable(t, "the audit position", time.Second, 30*time.Second, d.Position)
	checkSession(t, d, true)
	return head
}

// sendData publishes n NDATA, failing the test unless each is acknowledged.
func sendData(t *testing.T, e *spEdge, n int) {
	t.Helper()
	for range n {
		if !e.data(spValues(e.next)) {
			t.Fatalf("the broker did not acknowledge NDATA %s#%d", e.epoch(), e.next-1)
		}
	}
}

// spValues are the metrics of the n-th NDATA of a session: 0.25 to 1 kWh,
// −10 to 29 °C (negative Int32s, sent by alias, are read with the birth's
// datatype).
func spValues(n int64) (quarters, temp int64) { return 1 + n%4, -10 + n%40 }

// spFeeder publishes the session's data steadily (250 a second) until
// stopped.
type spFeeder struct {
	done chan struct{}
	quit chan struct{}
	once sync.Once
}

func startSpFeeder(t *testing.T, e *spEdge) *spFeeder {
	return startSpFeederEvery(t, e, 4*time.Millisecond)
}

// startSpFeederEvery publishes an NDATA every period until stopped.
func startSpFeederEvery(t *testing.T, e *spEdge, period time.Duration) *spFeeder {
	f := &spFeeder{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-f.quit:
				return
			case <-tick.C:
			}
			if !e.data(spValues(e.next)) {
				t.Errorf("the broker, which never fails here, did not acknowledge NDATA %s#%d", e.epoch(), e.next-1)
				return
			}
		}
	}()
	t.Cleanup(f.stop)
	return f
}

func (f *spFeeder) stop() {
	f.once.Do(func() { close(f.quit) })
	<-f.done
}

// newSparkplugSetup writes a configuration of the Sparkplug route
// consuming broker, into a new store, with the HTTP API on a free port.
func newSparkplugSetup(t *testing.T, broker string) *setup {
	t.Helper()
	dir := t.TempDir()
	s := &setup{Path: filepath.Join(dir, "replayguard.yaml"), Listen: fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))}
	text := fmt.Sprintf(spConfig, filepath.Join(dir, "data"), broker, testbroker.UniqueClientID("rg-sparkplug"), s.Listen)
	if err := os.WriteFile(s.Path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(s.Path)
	if err != nil {
		t.Fatalf("configuration:\n%s\n%v", text, err)
	}
	if err := cfg.ValidateRun(); err != nil {
		t.Fatal(err)
	}
	s.Config = cfg
	return s
}

// spReport is the edge's source report, from the running daemon's API.
func spReport(d *daemon) (engine.SourceReport, bool) {
	var reps []engine.SourceReport
	d.getJSON("/api/v1/sources", &reps)
	for _, r := range reps {
		if len(r.Source) == 2 && r.Source[0] == spGroup && r.Source[1] == spNode {
			return r, true
		}
	}
	return engine.SourceReport{}, false
}

// waitSpHigh waits until the edge's current epoch is epoch with its
// highest applied sequence at high.
func waitSpHigh(t *testing.T, d *daemon, epoch string, high int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the edge's session %s applied up to %d", epoch, high), time.Minute, func() bool {
		r, ok := spReport(d)
		return ok && r.Epoch == epoch && r.High == high
	})
}
