package sparkplug_test

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/memory"
)

// TestADeviceDeathDecidedBeforeItsNBirthLeavesTheDeviceOffline: a DBIRTH
// and then a DDEATH of the edge's next birth, decided before that birth's
// NBIRTH (in a group another member holds the NBIRTH), are applied in the
// birth before, above its highest. Once the NBIRTH is decided, the device
// is the new birth's, and it is offline: its DDEATH, stamped after its
// DBIRTH, was applied. Their replays are duplicates.
func TestADeviceDeathDecidedBeforeItsNBirthLeavesTheDeviceOffline(t *testing.T) {
	t.Run("single-owner", func(t *testing.T) {
		testDeviceDeathBeforeItsNBirth(t, func(t *testing.T) (*harness, *harness) {
			h := newHarness(t, memory.New())
			return h, h
		})
	})
	t.Run("memory group", func(t *testing.T) {
		testDeviceDeathBeforeItsNBirth(t, func(t *testing.T) (*harness, *harness) {
			open := memoryGroup(t)
			return newHarness(t, open("a")), newHarness(t, open("b"))
		})
	})
}

func testDeviceDeathBeforeItsNBirth(t *testing.T, members func(t *testing.T) (*harness, *harness)) {
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
			ddeath := edge.DeviceDeath("pump", c.next())
			b.expect(engine.Applied, dbirth, ddeath) // ... while member b decides the device's after them
			a.expect(engine.Applied, held...)
			b.expect(engine.Duplicate, dbirth, ddeath)
			if r := a.source("m1").Sparkplug; len(r.Devices) != 1 || r.Devices[0].Online {
				t.Fatalf("session %+v: want the pump offline", r)
			}
		})
	}
}

// TestADeviceDeathDecidedBeforeItsDBirthLeavesTheDeviceOffline: a device
// born again within its edge's birth, its new DBIRTH and then its DDEATH
// decided in the reverse order (the broker reordered them): the DDEATH,
// stamped after the new DBIRTH, was applied, and the device is offline.
func TestADeviceDeathDecidedBeforeItsDBirthLeavesTheDeviceOffline(t *testing.T) {
	h := newHarness(t, memory.New())
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	state := []sparkplug.Metric{{Name: "Node Control/State", Datatype: sparkplug.String, Value: "on"}}
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), state))
	h.expect(engine.Applied, edge.DeviceDeath("pump", c.next()))
	dbirth := edge.DeviceBirth("pump", c.next(), state)
	ddeath := edge.DeviceDeath("pump", c.next())
	h.expect(engine.Applied, ddeath)
	if d := h.send(dbirth); !d[0].Outcome.Effective() {
		t.Fatalf("the DBIRTH after its DDEATH: %s (%s), want applied", d[0].Outcome, d[0].Reason)
	}
	if r := h.source("m1").Sparkplug; len(r.Devices) != 1 || r.Devices[0].Online {
		t.Fatalf("session %+v: want the pump offline", r)
	}
}
