package sparkplug_test

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// pumpMetrics is a DBIRTH of a pump whose Pulses and Temperature take the
// aliases given.
func pumpMetrics(pulses, temperature uint64) []sparkplug.Metric {
	return []sparkplug.Metric{
		{Name: "Pulses", Alias: pulses, Datatype: sparkplug.Int64, Value: int64(0)},
		{Name: "Temperature", Alias: temperature, Datatype: sparkplug.Int32, Value: int64(20)},
	}
}

// TestDeviceDataFromBeforeItsDevicesRebirthIsNotReadWithTheNewAliases: a
// device dies and is born again within its edge's birth, its DBIRTH
// swapping two aliases. A DDATA it sent under the first DBIRTH, decided
// only now (a broker's late redelivery), would be read with the second
// DBIRTH's table, a Temperature of 21 as 21 pulses: it is held, and so is
// the replay of one applied then, which that table cannot prove. With a
// DBIRTH that gives the same aliases, the replay is the duplicate it is.
func TestDeviceDataFromBeforeItsDevicesRebirthIsNotReadWithTheNewAliases(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(1, 2)))
		late := edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Temperature", Value: int64(21)}})
		applied := edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Pulses", Value: int64(1)}})
		h.expect(engine.Applied, applied)
		h.expect(engine.Applied, edge.DeviceDeath("pump", c.next()))
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(2, 1)))
		for _, m := range []sparkplug.Message{late, applied} {
			d := h.expect(engine.Quarantined, m)
			if !strings.Contains(d[0].Reason, "predates the device's last DBIRTH") {
				t.Fatalf("reason %q", d[0].Reason)
			}
		}
		if got := h.field("meter/m1", "pulses"); got != "1" {
			t.Fatalf("pulses %s, want 1", got)
		}
		again := edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Pulses", Value: int64(1)}})
		h.expect(engine.Applied, again)
		h.expect(engine.Applied, edge.DeviceDeath("pump", c.next()))
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(2, 1)))
		h.expect(engine.Duplicate, again)
		if got := h.field("meter/m1", "pulses"); got != "2" {
			t.Fatalf("pulses %s, want 2", got)
		}
	})
}

// TestADeviceBirthDecidedLateKeepsTheDevicesCurrentAliases: a device's
// DBIRTH and DDEATH decided after its next DBIRTH (a broker's late
// redelivery) fill their gaps, but the device keeps its last DBIRTH's
// aliases, and stays online.
func TestADeviceBirthDecidedLateKeepsTheDevicesCurrentAliases(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		first := edge.DeviceBirth("pump", c.next(), pumpMetrics(1, 2))
		death := edge.DeviceDeath("pump", c.next())
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(2, 1)))
		h.expect(engine.AppliedLate, first, death)
		h.expect(engine.Applied, edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Temperature", Value: int64(21)}}))
		if got := h.field("meter/m1", "pulses"); got != "0" {
			t.Errorf("pulses %s, want 0: a Temperature of 21 was read as 21 pulses", got)
		}
		if r := h.source("m1").Sparkplug; len(r.Devices) != 1 || !r.Devices[0].Online {
			t.Errorf("session %+v: want the pump online", r)
		}
	})
}
