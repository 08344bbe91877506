package sparkplug_test

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/embedded"
)

// The edge's session (its epoch, alias tables, online state) is committed
// with its window: after a restart on the embedded store, data by alias is
// still read with the birth's table and replays are still caught.
func TestSessionSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *harness {
		s, err := embedded.Open(dir, embedded.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, s)
		t.Cleanup(func() { s.Close() })
		return h
	}
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 200)
	h := open()
	h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	h.expect(engine.Applied, edge.DeviceBirth("pump", c.next(), []sparkplug.Metric{{Name: "Node Control/State", Datatype: sparkplug.String, Value: "on"}}))
	var sent []sparkplug.Message
	for range 5 {
		m := edge.Data(c.next(), []sparkplug.Metric{{Name: "Energy", Value: 1.25}, {Name: "Pulses", Value: int64(2)}})
		sent = append(sent, m)
		h.expect(engine.Applied, m)
	}
	h.e.Close()
	h.store.Close()

	h = open()
	h.expect(engine.Duplicate, sent...)
	h.expect(engine.Applied, edge.Data(c.next(), []sparkplug.Metric{{Name: "Energy", Value: 3.5}, {Name: "Pulses", Value: int64(2)}}))
	h.expect(engine.Applied, edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Node Control/State", Value: "off"}}))
	if h.field("meter/m1", "kwh") != "3.5" || h.field("meter/m1", "pulses") != "12" || h.field("dev/m1/pump", "state") != `"off"` {
		t.Fatalf("state after restart %v: want kwh 3.5, pulses 12, pump off", h.state())
	}
	r := h.source("m1")
	if r.Sparkplug == nil || !r.Sparkplug.Online || r.Sparkplug.BdSeq != 200 || r.High != 8 || len(r.Sparkplug.Devices) != 1 {
		t.Fatalf("source after restart %+v %+v", r, r.Sparkplug)
	}
}
