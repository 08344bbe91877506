package sparkplug_test

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// releaseHeld releases the held entries of msgs, in order, each expected
// effective.
func (h *harness) releaseHeld(msgs ...sparkplug.Message) {
	h.t.Helper()
	ids := map[string]uint64{}
	if err := h.store.ScanQuarantine(h.t.Context(), func(q engine.QuarantineEntry) error {
		ids[string(q.Payload)] = q.ID
		return nil
	}); err != nil {
		h.t.Fatal(err)
	}
	for _, m := range msgs {
		id, ok := ids[string(m.Payload)]
		if !ok {
			h.t.Fatalf("%s is not held", m.Topic)
		}
		d, err := h.e.Release(h.t.Context(), id, "op")
		if err != nil {
			h.t.Fatal(err)
		}
		if !d.Outcome.Effective() {
			h.t.Fatalf("released %s: %s (%s)", m.Topic, d.Outcome, d.Reason)
		}
	}
}

// expectHeldAfterBirth decides msgs, each expected held because the
// birth it was sent after was held.
func (h *harness) expectHeldAfterBirth(what string, msgs ...sparkplug.Message) {
	h.t.Helper()
	for _, d := range h.expect(engine.Quarantined, msgs...) {
		if !strings.Contains(d.Reason, "at or after a "+what) || !strings.Contains(d.Reason, "that was held") {
			h.t.Fatalf("reason %q, want one saying its %s was held", d.Reason, what)
		}
	}
}

// TestDataAfterAHeldNBirthIsHeldNotReadWithTheAliasesBefore: a rebirth
// whose NBIRTH swaps the aliases of Pulses and Temperature and gives one
// alias twice is malformed. The NDATA the edge sends after it, in order,
// on a single owner, would be placed in the birth before above its
// highest and read with its aliases (5 pulses as a Temperature of 5):
// it is held instead. The next good NBIRTH is applied and its data read
// with its own aliases; the held data, released, is read with them too,
// and its redelivery before that is held again, never a duplicate.
func TestDataAfterAHeldNBirthIsHeldNotReadWithTheAliasesBefore(t *testing.T) {
	onEveryStore(t, testDataAfterAHeldNBirth)
}

// TestDataAfterAHeldNBirthIsHeldOnASharedStore is the same on a member
// of a group on PostgreSQL and on Redis: the mark is on the edge's row.
func TestDataAfterAHeldNBirthIsHeldOnASharedStore(t *testing.T) {
	onSharedServers(t, func(t *testing.T, newGroup func() func(string) engine.Store) {
		testDataAfterAHeldNBirth(t, newGroup()("a"))
	})
}

func testDataAfterAHeldNBirth(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics)) // Energy 1, Pulses 2, Temperature 3
	h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	swapped := []sparkplug.Metric{
		{Name: "Energy", Alias: 1, Datatype: sparkplug.Double, Value: 0.0},
		{Name: "Pulses", Alias: 3, Datatype: sparkplug.Int64, Value: int64(0)},
		{Name: "Temperature", Alias: 3, Datatype: sparkplug.Int32, Value: int64(20)},
	}
	d := h.expect(engine.Malformed, edge.Birth(c.next(), swapped))
	if !strings.Contains(d[0].Reason, "have the same alias 3") {
		t.Fatalf("reason %q", d[0].Reason)
	}
	five := []sparkplug.Metric{{Name: "Pulses", Value: int64(5)}} // by alias 3
	first := edge.Data(c.next(), five)                            // seq 1: not above the birth before's highest
	h.expect(engine.Quarantined, first)
	held := []sparkplug.Message{edge.Data(c.next(), five), edge.Data(c.next(), five)} // seq 2 and 3
	h.expectHeldAfterBirth("NBIRTH", held...)
	if p, temp := h.field("meter/m1", "pulses"), h.field("meter/m1", "temp"); p != "1" || temp != "20" {
		t.Fatalf("pulses %s, temp %s, want 1 and 20: data of the held NBIRTH was read with the aliases before", p, temp)
	}
	good := []sparkplug.Metric{
		{Name: "Energy", Alias: 1, Datatype: sparkplug.Double, Value: 0.0},
		{Name: "Pulses", Alias: 3, Datatype: sparkplug.Int64, Value: int64(0)},
		{Name: "Temperature", Alias: 2, Datatype: sparkplug.Int32, Value: int64(20)},
	}
	h.expect(engine.Applied, edge.Birth(c.next(), good))
	h.expect(engine.Applied, edge.Data(c.next(), five))
	if got := h.field("meter/m1", "pulses"); got != "6" {
		t.Fatalf("pulses %s, want 6", got)
	}
	h.expectHeldAfterBirth("NBIRTH", held...) // redelivered: still held, not a duplicate
	h.releaseHeld(held...)
	h.expect(engine.Duplicate, held...)
	if p, temp := h.field("meter/m1", "pulses"), h.field("meter/m1", "temp"); p != "16" || temp != "20" {
		t.Fatalf("pulses %s, temp %s, want 16 and 20: released, the held data was not read with the NBIRTH that replaced its own", p, temp)
	}
}

// TestDeviceDataAfterAHeldDBirthIsHeldNotReadWithTheAliasesBefore: the
// same for a device whose DBIRTH gives one alias twice (and swaps the
// aliases of Pulses and Temperature): its DDATA is held until a good
// DBIRTH, then read with that DBIRTH's aliases, released too.
func TestDeviceDataAfterAHeldDBirthIsHeldNotReadWithTheAliasesBefore(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(1, 2)))
		h.expect(engine.Applied, edge.DeviceData("pump", c.next(), pulse()))
		h.expect(engine.Malformed, edge.DeviceBirth("pump", c.next(), pumpMetrics(2, 2)))
		five := []sparkplug.Metric{{Name: "Pulses", Value: int64(5)}} // by alias 2
		held := []sparkplug.Message{edge.DeviceData("pump", c.next(), five), edge.DeviceData("pump", c.next(), five)}
		h.expectHeldAfterBirth("DBIRTH", held...)
		if p, temp := h.field("meter/m1", "pulses"), h.field("meter/m1", "temp"); p != "1" || temp != "20" {
			t.Fatalf("pulses %s, temp %s, want 1 and 20: data of the held DBIRTH was read with the aliases before", p, temp)
		}
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(2, 1)))
		h.expect(engine.Applied, edge.DeviceData("pump", c.next(), five))
		h.expectHeldAfterBirth("DBIRTH", held...)
		h.releaseHeld(held...)
		h.expect(engine.Duplicate, held...)
		if p, temp := h.field("meter/m1", "pulses"), h.field("meter/m1", "temp"); p != "16" || temp != "20" {
			t.Fatalf("pulses %s, temp %s, want 16 and 20", p, temp)
		}
	})
}

// TestInOrderDataOfGoodBirthsIsNeverHeld: rebirths and new sessions that
// swap aliases, device rebirths, and a replay of an old NBIRTH held as
// malformed (stamped before the current birth) hold none of the data
// that follows them in order.
func TestInOrderDataOfGoodBirthsIsNeverHeld(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		stale := edge.Birth(c.next(), pumpMetrics(1, 1)) // malformed, stamped before every birth
		for i := range 4 {
			if i == 2 {
				edge.NewSession()
			}
			h.expect(engine.Applied, edge.Birth(c.next(), pumpMetrics(uint64(1+i%2), uint64(2-i%2))))
			h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(uint64(2-i%2), uint64(1+i%2))))
			h.expect(engine.Malformed, stale)
			for range 3 {
				h.expect(engine.Applied, edge.Data(c.next(), pulse()), edge.DeviceData("pump", c.next(), pulse()))
			}
			h.expect(engine.Applied, edge.DeviceDeath("pump", c.next()))
			h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(uint64(1+i%2), uint64(2-i%2))))
			h.expect(engine.Applied, edge.DeviceData("pump", c.next(), pulse()))
		}
		if got := h.field("meter/m1", "pulses"); got != "28" {
			t.Fatalf("pulses %s, want 28", got)
		}
		if got := h.field("meter/m1", "temp"); got != "20" {
			t.Fatalf("temp %s, want 20: a pulse was read as a Temperature", got)
		}
	})
}
