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

// TestDeviceDataFromBeforeItsDevicesRebirthIsReadWithItsOwnAliases: a
// device dies and is born again within its edge's birth, its DBIRTH
// swapping two aliases. A DDATA it sent under the first DBIRTH, decided
// only now (a broker's late redelivery), is read with the first DBIRTH's
// table, not the second's (which would read a Temperature of 21 as 21
// pulses): applied late, and the replay of one applied then is its
// duplicate. Once the device has had more DBIRTHs with other tables than
// the birth keeps (window.keep_epochs + 1 before its last), a DDATA sent
// under the first is held: no kept table can read it.
func TestDeviceDataFromBeforeItsDevicesRebirthIsReadWithItsOwnAliases(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(1, 2)))
		late := edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Temperature", Value: int64(21)}})
		applied := edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Pulses", Value: int64(1)}})
		gone := edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Temperature", Value: int64(22)}})
		h.expect(engine.Applied, applied)
		h.expect(engine.Applied, edge.DeviceDeath("pump", c.next()))
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(2, 1)))
		h.expect(engine.AppliedLate, late)
		h.expect(engine.Duplicate, applied)
		if got := h.field("meter/m1", "pulses"); got != "1" {
			t.Fatalf("pulses %s, want 1: a Temperature of 21 was read as 21 pulses", got)
		}
		for i := range engine.DefaultKeepEpochs + 1 { // the first DBIRTH's table leaves the birth
			h.expect(engine.Applied, edge.DeviceDeath("pump", c.next()))
			h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(uint64(1+i%2), uint64(2-i%2))))
		}
		d := h.expect(engine.Quarantined, gone)
		if !strings.Contains(d[0].Reason, "predates the device's last DBIRTH") {
			t.Fatalf("reason %q", d[0].Reason)
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

// TestDeviceDataDecidedByALaggingMemberAfterItsDevicesRebirthIsADuplicate:
// every member of a group receives an edge's messages, and the one behind
// decides each after another has applied it. A device born again with
// other aliases (a DBIRTH after its DDEATH, within its edge's birth) must
// not make the lagging member's copy of a DDATA sent before it anything
// but the duplicate it is: read with the DBIRTH it was sent under, not
// held because the device's last DBIRTH lacks its alias.
func TestDeviceDataDecidedByALaggingMemberAfterItsDevicesRebirthIsADuplicate(t *testing.T) {
	onSharedServers(t, func(t *testing.T, newGroup func() func(string) engine.Store) {
		open := newGroup()
		a, b := newHarness(t, open("a")), newHarness(t, open("b"))
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		feed := []sparkplug.Message{
			edge.Birth(c.next(), meterMetrics),
			edge.DeviceBirth("pump", c.next(), pumpMetrics(1, 2)),
			edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Pulses", Value: int64(1)}}),
			edge.DeviceDeath("pump", c.next()),
			edge.DeviceBirth("pump", c.next(), pumpMetrics(7, 8)),
			edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Pulses", Value: int64(1)}}),
		}
		a.expect(engine.Applied, feed...)
		for i, m := range feed { // member b's copies, decided after a applied them
			if d := b.send(m); d[0].Outcome != engine.Duplicate {
				t.Errorf("message %d (%s) on the lagging member: %s (%s), want duplicate", i, m.Topic, d[0].Outcome, d[0].Reason)
			}
		}
		if got := b.field("meter/m1", "pulses"); got != "2" {
			t.Fatalf("pulses %s, want 2", got)
		}
	})
}

// TestDeviceDataSentUnderADeviceBirthDecidedLateIsReadWithItsTable: a
// device's DBIRTH decided after its next one (a broker's late redelivery)
// leaves the device its last DBIRTH's table, but the DDATA sent under it,
// decided later still, is read with its table: not with the one of the
// DBIRTH before it, which gives its alias to another metric.
func TestDeviceDataSentUnderADeviceBirthDecidedLateIsReadWithItsTable(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(1, 2)))
		h.expect(engine.Applied, edge.DeviceDeath("pump", c.next()))
		late := edge.DeviceBirth("pump", c.next(), pumpMetrics(2, 1))
		data := edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Temperature", Value: int64(21)}})
		death := edge.DeviceDeath("pump", c.next())
		h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), pumpMetrics(5, 6)))
		h.expect(engine.AppliedLate, late, death)
		h.expect(engine.AppliedLate, data)
		if got := h.field("meter/m1", "pulses"); got != "0" {
			t.Errorf("pulses %s, want 0: a Temperature of 21 was read as 21 pulses", got)
		}
		if r := h.source("m1").Sparkplug; len(r.Devices) != 1 || !r.Devices[0].Online {
			t.Errorf("session %+v: want the pump online", r)
		}
	})
}
