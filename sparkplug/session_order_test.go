package sparkplug_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
)

// withoutTimestamp is m with its payload's timestamp left out.
func withoutTimestamp(t *testing.T, m sparkplug.Message) sparkplug.Message {
	t.Helper()
	var p pb.Payload
	if err := proto.Unmarshal(m.Payload, &p); err != nil {
		t.Fatal(err)
	}
	p.Timestamp = nil
	return sparkplug.Message{Topic: m.Topic, Payload: encode(t, &p)}
}

// A message's timestamp is what tells which of its edge's births it
// belongs to. Without one, a replay of the session before the current one
// (or its genuine late data) would be read in the current session: applied
// there a second time, and taking the key and seq of the current session's
// own message, which would then be suppressed as its duplicate. Sparkplug
// B requires the timestamp: a message without one is malformed, held with
// its raw bytes.
func TestDataWithoutATimestampIsNotReadInTheCurrentSession(t *testing.T) {
	onEveryStore(t, testDataWithoutATimestamp)
}

func testDataWithoutATimestamp(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	// Session 0's seq 1 … 10: 1 … 8 are applied, 9 and 10 are late; 4 … 10
	// come again after session 1's NBIRTH, without their timestamps.
	var old []sparkplug.Message
	for i := range 10 {
		m := edge.Data(c.next(), pulse())
		if i < 8 {
			h.expect(engine.Applied, m)
		}
		if i >= 3 {
			old = append(old, withoutTimestamp(t, m))
		}
	}
	h.expect(engine.Applied, edge.Death(c.next()))
	edge.NewSession()
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	for range 3 { // seq 1 … 3 of session 1
		h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	}
	for i, d := range h.send(old...) { // session 0's, replayed and late
		if d.Outcome != engine.Malformed || !strings.Contains(d.Reason, "NDATA has no timestamp") {
			t.Errorf("seq %d of session 0 without a timestamp, after session 1's NBIRTH: %s (%s) in epoch %q at seq %d, want malformed",
				i+4, d.Outcome, d.Reason, d.Epoch, d.Sequence)
		}
	}
	for i := range 8 { // seq 4 … 11 of session 1: none was taken by session 0's
		if d := h.send(edge.Data(c.next(), pulse())); d[0].Outcome != engine.Applied {
			t.Errorf("seq %d of session 1: %s (%s), want applied", i+4, d[0].Outcome, d[0].Reason)
		}
	}
	if got := h.field("meter/m1", "pulses"); got != "19" {
		t.Fatalf("pulses %s, want 19: 8 of session 0, 11 of session 1", got)
	}
	held := map[string]bool{}
	if err := h.store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
		held[string(q.Payload)] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, m := range old {
		if !held[string(m.Payload)] {
			t.Errorf("seq %d of session 0 is not held with its raw bytes", i+4)
		}
	}
}

// An edge's NDEATH and NBIRTH of one session can be decided in either
// order (a failover's broker redelivers in any order; in a group another
// member may decide the NDEATH first). Whichever comes first, the session
// ended: the edge is offline until a later birth, and an older session's
// NDEATH never takes a newer one offline.
func TestABirthDecidedAfterItsSessionsDeathLeavesTheEdgeOffline(t *testing.T) {
	online := func(t *testing.T, h *harness, want bool, bdSeq int64, epoch, when string) {
		t.Helper()
		r := h.source("m1")
		if r.Sparkplug == nil || r.Sparkplug.Online != want || r.Sparkplug.BdSeq != bdSeq || r.Epoch != epoch {
			t.Errorf("%s: session %+v in epoch %q, want online %v, bdSeq %d, epoch %q", when, r.Sparkplug, r.Epoch, want, bdSeq, epoch)
		}
	}
	for _, tc := range []struct {
		name string
		test func(t *testing.T, h *harness, edge *sparkplug.Edge, c *clock)
	}{
		{"an NDEATH before any NBIRTH of the edge", func(t *testing.T, h *harness, edge *sparkplug.Edge, c *clock) {
			birth, death := edge.Birth(c.next(), meterMetrics), edge.Death(c.next())
			h.expect(engine.Applied, death)
			h.expect(engine.Applied, birth)
			online(t, h, false, 7, "7", "NBIRTH 7 after NDEATH 7")
			h.expect(engine.Duplicate, death, birth)
			online(t, h, false, 7, "7", "both again")
			edge.NewSession()
			h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
			online(t, h, true, 8, "8", "NBIRTH 8")
			h.expect(engine.Duplicate, death)
			online(t, h, true, 8, "8", "NDEATH 7 again")
		}},
		{"the next session's NDEATH before its NBIRTH", func(t *testing.T, h *harness, edge *sparkplug.Edge, c *clock) {
			h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
			h.expect(engine.Applied, edge.Data(c.next(), pulse()))
			edge.NewSession() // session 7 ends without a Will (its broker crashed)
			birth, death := edge.Birth(c.next(), meterMetrics), edge.Death(c.next())
			h.expect(engine.Applied, death)
			h.expect(engine.Applied, birth)
			online(t, h, false, 8, "8", "NBIRTH 8 after NDEATH 8")
		}},
		{"a rebirth's NBIRTH after its session's NDEATH", func(t *testing.T, h *harness, edge *sparkplug.Edge, c *clock) {
			h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
			h.expect(engine.Applied, edge.Data(c.next(), pulse()))
			rebirth, death := edge.Birth(c.next(), meterMetrics), edge.Death(c.next())
			h.expect(engine.Applied, death)
			h.expect(engine.Applied, rebirth)
			online(t, h, false, 7, "7.1", "the rebirth after NDEATH 7")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onEveryStore(t, func(t *testing.T, store engine.Store) {
				tc.test(t, newHarness(t, store), sparkplug.NewEdge("plant", "m1", 7), newClock())
			})
		})
	}
}

// Data of the next birth decided before its NBIRTH, stamped after the
// current birth's highest yet at or below its seq, is held: it waits for
// its NBIRTH. Released before the NBIRTH, it is held again; released after
// it, whatever that birth applied meanwhile, it is applied once in that
// birth at its own seq, and its redelivery is its duplicate.
func TestDataHeldForItsBirthIsAppliedThereWhenReleased(t *testing.T) {
	for _, tc := range nextBirths {
		t.Run(tc.name, func(t *testing.T) {
			onEveryStore(t, func(t *testing.T, store engine.Store) { testHeldForItsBirth(t, store, tc.next) })
		})
	}
}

func testHeldForItsBirth(t *testing.T, store engine.Store, next func(e *sparkplug.Edge, c *clock) []sparkplug.Message) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	for range 30 { // seq 1 … 30
		h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	}
	births := next(edge, c)
	var data []sparkplug.Message
	for range 20 { // seq 1 … 20 of the next birth
		data = append(data, edge.Data(c.next(), pulse()))
	}
	d := h.expect(engine.Quarantined, data[4])
	if !strings.Contains(d[0].Reason, "it waits for the NBIRTH of its birth") {
		t.Fatalf("seq 5 of the next birth before its NBIRTH: reason %q", d[0].Reason)
	}
	release := func(want engine.Outcome) engine.Decision {
		t.Helper()
		var ids []uint64
		if err := h.store.ScanQuarantine(t.Context(), func(q engine.QuarantineEntry) error {
			ids = append(ids, q.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 {
			t.Fatalf("%d messages held, want 1", len(ids))
		}
		d, err := h.e.Release(t.Context(), ids[0], "op")
		if err != nil {
			t.Fatal(err)
		}
		if d.Outcome != want {
			t.Fatalf("released: %s (%s) in epoch %q at seq %d, want %s", d.Outcome, d.Reason, d.Epoch, d.Sequence, want)
		}
		return d
	}
	release(engine.Quarantined) // its NBIRTH is not decided yet
	h.expect(engine.Applied, births...)
	h.expect(engine.Applied, data[:4]...)
	h.expect(engine.Applied, data[5:]...)
	r := release(engine.AppliedLate)
	if want := h.source("m1").Epoch; r.Epoch != want || r.Sequence != 5 {
		t.Fatalf("released in epoch %q at seq %d, want epoch %q at seq 5", r.Epoch, r.Sequence, want)
	}
	h.expect(engine.Duplicate, data...)
	if got, want := h.field("meter/m1", "pulses"), fmt.Sprint(30+20); got != want {
		t.Fatalf("pulses %s, want %s", got, want)
	}
}
