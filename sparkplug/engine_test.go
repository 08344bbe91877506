package sparkplug_test

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

func TestSeqCrossesTheWrapWithReplaysOnBothSides(t *testing.T) {
	onEveryStore(t, testSeqCrossesTheWrapWithReplaysOnBothSides)
}

func testSeqCrossesTheWrapWithReplaysOnBothSides(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 7)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	var sent []sparkplug.Message
	for range 300 { // seq 1 … 255, 0 … 44: unwrapped 1 … 300
		m := edge.Data(c.next(), pulse())
		sent = append(sent, m)
		h.expect(engine.Applied, m)
	}
	// Replays of the last messages before the wrap and the first after it.
	h.expect(engine.Duplicate, sent[250:262]...)
	h.expect(engine.Duplicate, sent[280:]...)
	if got := h.field("meter/m1", "pulses"); got != "300" {
		t.Fatalf("pulses %s, want 300", got)
	}
	r := h.source("m1")
	if r.High != 300 || len(r.Gaps) != 0 || r.Epoch != "7" {
		t.Fatalf("source %+v: want high 300 (seq 44 after one wrap), no gaps, epoch 7", r)
	}
	// A genuine message skipped before the wrap arrives late: applied once.
	skip := edge.Data(c.next(), pulse()) // 301
	edge.Data(c.next(), pulse())         // 302 lost for now
	late := edge.Data(c.next(), pulse()) // 303
	h.expect(engine.Applied, skip)
	h.expect(engine.Applied, late)
	if r := h.source("m1"); len(r.Gaps) != 1 || r.Gaps[0] != (engine.Range{From: 302, To: 302}) {
		t.Fatalf("gaps %+v, want [302]", r.Gaps)
	}
}

func TestSeqExactlyHalfTheRingAwayIsHeld(t *testing.T) {
	onEveryStore(t, testSeqExactlyHalfTheRingAwayIsHeld)
}

func testSeqExactlyHalfTheRingAwayIsHeld(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	edge.SetSeq(128)
	d := h.expect(engine.Quarantined, edge.Data(c.next(), pulse()))
	if !strings.Contains(d[0].Reason, "seq 128 cannot be placed: 128 from the session's highest") {
		t.Fatalf("reason %q", d[0].Reason)
	}
	edge.SetSeq(127)
	h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	if got := h.field("meter/m1", "pulses"); got != "1" {
		t.Fatalf("pulses %s, want 1", got)
	}
}

func TestRebirthWithANewBdSeqRestartsTheSeqAndCatchesOldReplays(t *testing.T) {
	onEveryStore(t, testRebirthWithANewBdSeqRestartsTheSeqAndCatchesOldReplays)
}

func testRebirthWithANewBdSeqRestartsTheSeqAndCatchesOldReplays(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 3)
	first := edge.Birth(c.next(), meterMetrics)
	h.expect(engine.Applied, first)
	var old []sparkplug.Message
	for range 10 {
		m := edge.Data(c.next(), pulse())
		old = append(old, m)
		h.expect(engine.Applied, m)
	}
	death := edge.Death(c.next())
	h.expect(engine.Applied, death)
	if r := h.source("m1"); r.Sparkplug == nil || r.Sparkplug.Online {
		t.Fatalf("after NDEATH: %+v, want offline", r.Sparkplug)
	}
	edge.NewSession()
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	for range 4 { // seq 1 … 4 again, in session 4
		h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	}
	// The failover replays the old session: its data, its birth, its death.
	h.expect(engine.Duplicate, old...)
	h.expect(engine.Duplicate, first, death)
	if got := h.field("meter/m1", "pulses"); got != "14" {
		t.Fatalf("pulses %s, want 14", got)
	}
	r := h.source("m1")
	if r.Epoch != "4" || r.High != 4 || len(r.Older) != 1 || r.Older[0].Epoch != "3" || r.Older[0].High != 10 {
		t.Fatalf("source %+v: want epoch 4 high 4, older epoch 3 high 10", r)
	}
	if !r.Sparkplug.Online || r.Sparkplug.BdSeq != 4 {
		t.Fatalf("session %+v: want online, bdSeq 4", r.Sparkplug)
	}
}

func TestRebirthInTheSameSessionIsANewEpoch(t *testing.T) {
	onEveryStore(t, testRebirthInTheSameSessionIsANewEpoch)
}

func testRebirthInTheSameSessionIsANewEpoch(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 9)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	var old []sparkplug.Message
	for range 5 {
		m := edge.Data(c.next(), pulse())
		old = append(old, m)
		h.expect(engine.Applied, m)
	}
	// A rebirth on request: the same bdSeq, seq 0 again, a later timestamp.
	d := h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	if d[0].Epoch != "9.1" {
		t.Fatalf("rebirth epoch %q, want 9.1", d[0].Epoch)
	}
	h.expect(engine.Applied, edge.Data(c.next(), pulse()), edge.Data(c.next(), pulse()))
	h.expect(engine.Duplicate, old...)
	if got := h.field("meter/m1", "pulses"); got != "7" {
		t.Fatalf("pulses %s, want 7", got)
	}
}

func TestBdSeqWrapsAndStillOrdersSessions(t *testing.T) {
	onEveryStore(t, testBdSeqWrapsAndStillOrdersSessions)
}

func testBdSeqWrapsAndStillOrdersSessions(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 254)
	var births []sparkplug.Message
	for i := range 4 { // bdSeq 254, 255, 0, 1
		if i > 0 {
			edge.NewSession()
		}
		b := edge.Birth(c.next(), meterMetrics)
		births = append(births, b)
		h.expect(engine.Applied, b)
		h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	}
	r := h.source("m1")
	if r.Sparkplug.BdSeq != 1 || r.Sparkplug.BdSeqUnwrapped != 257 || r.Epoch != "257" {
		t.Fatalf("after the bdSeq wrap: session %+v epoch %q, want bdSeq 1, unwrapped 257 (bdSeq 1 after 255)", r.Sparkplug, r.Epoch)
	}
	// Births of kept sessions are duplicates; so is the oldest's, whose
	// window is gone but whose key the key window holds with its content.
	h.expect(engine.Duplicate, births...)
}

func TestAliasTableChangeAtRebirth(t *testing.T) { onEveryStore(t, testAliasTableChangeAtRebirth) }

func testAliasTableChangeAtRebirth(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 1)
	h.expect(engine.Applied, edge.Birth(c.next(), []sparkplug.Metric{
		{Name: "Energy", Alias: 1, Datatype: sparkplug.Double, Value: 0.0},
		{Name: "Temperature", Alias: 2, Datatype: sparkplug.Int32, Value: int64(20)},
	}))
	oldData := edge.Data(c.next(), []sparkplug.Metric{{Name: "Energy", Value: 1.5}, {Name: "Temperature", Datatype: sparkplug.Int32, Value: int64(-4)}})
	h.expect(engine.Applied, oldData)
	if h.field("meter/m1", "kwh") != "1.5" || h.field("meter/m1", "temp") != "-4" {
		t.Fatalf("state %v: want kwh 1.5, temp -4 (an Int32 by alias is read signed)", h.state())
	}
	edge.NewSession()
	h.expect(engine.Applied, edge.Birth(c.next(), []sparkplug.Metric{
		{Name: "Energy", Alias: 2, Datatype: sparkplug.Double, Value: 1.5},
		{Name: "Temperature", Alias: 1, Datatype: sparkplug.Int32, Value: int64(21)},
	}))
	newData := edge.Data(c.next(), []sparkplug.Metric{{Name: "Energy", Value: 2.25}, {Name: "Temperature", Datatype: sparkplug.Int32, Value: int64(22)}})
	h.expect(engine.Applied, newData)
	if h.field("meter/m1", "kwh") != "2.25" || h.field("meter/m1", "temp") != "22" {
		t.Fatalf("state %v: want kwh 2.25, temp 22 after the aliases swapped", h.state())
	}
	// The old session's data, read with the old table, is its duplicate
	// (with the new table it would have changed content: a conflict).
	h.expect(engine.Duplicate, oldData)
	if h.field("meter/m1", "kwh") != "2.25" {
		t.Fatalf("an old replay changed the state: %v", h.state())
	}
}

func TestDataBeforeBirthAndUnknownAliasAreHeld(t *testing.T) {
	onEveryStore(t, testDataBeforeBirthAndUnknownAliasAreHeld)
}

func testDataBeforeBirthAndUnknownAliasAreHeld(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	early := edge.Data(c.next(), pulse())
	d := h.expect(engine.Quarantined, early)
	if !strings.Contains(d[0].Reason, `no birth certificate seen for edge "m1"`) {
		t.Fatalf("reason %q", d[0].Reason)
	}
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics[:1]))
	stray := edge.Data(c.next(), []sparkplug.Metric{{Name: "Energy", Value: 1.0}})
	// An alias the birth never gave: rewrite the table's only alias, 1, to 9.
	stray.Payload = rewriteAlias(t, stray.Payload, 1, 9)
	d = h.expect(engine.Quarantined, stray)
	if !strings.Contains(d[0].Reason, "alias 9 of edge \"m1\" is not in its current birth certificate") {
		t.Fatalf("reason %q", d[0].Reason)
	}
	dev := edge.DeviceData("pump", c.next(), pulse())
	d = h.expect(engine.Quarantined, dev)
	if !strings.Contains(d[0].Reason, `no DBIRTH seen for device "pump"`) {
		t.Fatalf("reason %q", d[0].Reason)
	}
}

func TestDeathsAndDevicesShowOnSources(t *testing.T) {
	onEveryStore(t, testDeathsAndDevicesShowOnSources)
}

func testDeathsAndDevicesShowOnSources(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 5)
	oldDeath := edge.Death(c.next())
	edge.NewSession()
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	state := []sparkplug.Metric{{Name: "Node Control/State", Datatype: sparkplug.String, Value: "running"}}
	h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), state))
	h.expect(engine.Applied, edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Node Control/State", Value: "stopped"}}))
	if got := h.field("dev/m1/pump", "state"); got != `"stopped"` {
		t.Fatalf("device state %s, want \"stopped\" (a metric name with a space and a slash)", got)
	}
	r := h.source("m1").Sparkplug
	if !r.Online || len(r.Devices) != 1 || !r.Devices[0].Online || r.LastBirth.IsZero() {
		t.Fatalf("session %+v: want online with pump online and a birth time", r)
	}
	// An older session's NDEATH (a late Will) changes nothing.
	h.expect(engine.Applied, oldDeath)
	if r := h.source("m1").Sparkplug; !r.Online {
		t.Fatalf("an old session's NDEATH took the edge offline")
	}
	h.expect(engine.Applied, edge.DeviceDeath("pump", c.next()))
	death := edge.Death(c.next())
	h.expect(engine.Applied, death)
	h.expect(engine.Duplicate, death)
	if r := h.source("m1").Sparkplug; r.Online || r.Devices[0].Online {
		t.Fatalf("session %+v: want the edge and its device offline", r)
	}
}

// A replay more than half the ring behind the highest is placed where its
// content was applied (a proven duplicate), never above the highest; one
// that was never applied there cannot be placed and is held. Released by
// an operator, it is placed where its timestamp puts it, behind the
// highest, and applied once: its replay is then a duplicate.
func TestAReplayMoreThanHalfTheRingBehindIsNotAppliedAgain(t *testing.T) {
	onEveryStore(t, testAReplayMoreThanHalfTheRingBehindIsNotAppliedAgain)
}

func testAReplayMoreThanHalfTheRingBehindIsNotAppliedAgain(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	var sent []sparkplug.Message
	lost := map[int]bool{4: true}
	for i := range 260 { // unwrapped 1 … 260; raw 4 … 5 come again as 260 and 261
		m := edge.Data(c.next(), pulse())
		sent = append(sent, m)
		if !lost[i] {
			h.expect(engine.Applied, m)
		}
	}
	h.expect(engine.Duplicate, sent[0:4]...)
	d := h.expect(engine.Quarantined, sent[4]) // seq 5, never applied, 255 behind
	if !strings.Contains(d[0].Reason, "more than half the ring behind") {
		t.Fatalf("reason %q", d[0].Reason)
	}
	if got := h.field("meter/m1", "pulses"); got != "259" {
		t.Fatalf("pulses %s, want 259", got)
	}
	var ids []uint64
	if err := h.store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		ids = append(ids, q.ID)
		return nil
	}); err != nil || len(ids) != 1 {
		t.Fatalf("held %v, %v: want the one message", ids, err)
	}
	r, err := h.e.Release(t.Context(), ids[0], "op")
	if err != nil || r.Outcome != engine.AppliedLate || r.Sequence != 5 {
		t.Fatalf("released: %s (%s) at seq %d, %v; want applied_late at seq 5", r.Outcome, r.Reason, r.Sequence, err)
	}
	if got := h.field("meter/m1", "pulses"); got != "260" {
		t.Fatalf("pulses %s after the release, want 260", got)
	}
	h.expect(engine.Duplicate, sent[4])
	if got := h.field("meter/m1", "pulses"); got != "260" {
		t.Fatalf("pulses %s after its replay, want 260", got)
	}
}
