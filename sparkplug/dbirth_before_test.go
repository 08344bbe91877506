package sparkplug_test

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// TestADeviceBirthDecidedBeforeItsNBirthIsThatBirthsDevice: an edge sends
// its DBIRTHs right after its NBIRTH. Decided before the NBIRTH (the
// broker reordered them, or in a group another member holds the NBIRTH)
// while the birth before is past seq 128, a DBIRTH is applied in the birth
// before, above its highest; once the NBIRTH is decided, the device is
// the new birth's: its DDATA are read with that DBIRTH's table and
// applied, not held for want of a DBIRTH, and the device shows online.
func TestADeviceBirthDecidedBeforeItsNBirthIsThatBirthsDevice(t *testing.T) {
	t.Run("single-owner", func(t *testing.T) {
		testDeviceBirthBeforeItsNBirth(t, func(t *testing.T) (*harness, *harness) {
			h := newHarness(t, memory.New())
			return h, h
		})
	})
	t.Run("memory group", func(t *testing.T) {
		testDeviceBirthBeforeItsNBirth(t, func(t *testing.T) (*harness, *harness) {
			open := memoryGroup(t)
			return newHarness(t, open("a")), newHarness(t, open("b"))
		})
	})
}

func testDeviceBirthBeforeItsNBirth(t *testing.T, members func(t *testing.T) (*harness, *harness)) {
	for _, tc := range nextBirths {
		t.Run(tc.name, func(t *testing.T) {
			a, b := members(t)
			c := newClock()
			edge := sparkplug.NewEdge("plant", "m1", 0)
			a.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
			for range 200 { // seq 1 … 200: the next birth's seq 1 is placed above the highest
				a.expect(engine.Applied, edge.Data(c.next(), pulse()))
			}
			held := tc.next(edge, c) // member a holds these ...
			dbirth := edge.DeviceBirth("pump", c.next(), []sparkplug.Metric{{Name: "Node Control/State", Datatype: sparkplug.String, Value: "on"}})
			b.expect(engine.Applied, dbirth) // ... while member b decides the DBIRTH after them
			a.expect(engine.Applied, held...)
			b.expect(engine.Duplicate, dbirth)
			a.expect(engine.Applied, edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Node Control/State", Value: "off"}}))
			if got := a.field("dev/m1/pump", "state"); got != `"off"` {
				t.Fatalf("pump %s, want off", got)
			}
			if r := a.source("m1").Sparkplug; len(r.Devices) != 1 || !r.Devices[0].Online {
				t.Fatalf("session %+v: want the pump online", r)
			}
		})
	}
}
