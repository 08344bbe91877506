package sparkplug_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
	pb "github.com/replayguard/replayguard/sparkplug/sparkplugpb"
	"github.com/replayguard/replayguard/store/embedded"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAReplayFromABirthOlderThanTheKeptOnesIsADuplicate: a failover's
// broker replays an edge's messages from a birth older than the epochs
// its source keeps (window.keep_epochs + 1 back: the edge was born again
// three times since). Their keys are still in the key window with the
// same content: each is a proven duplicate, the NBIRTH, the DBIRTH and
// data by alias alike, on the member that applied them and on another
// member of its group (every member receives a Sparkplug route's
// messages), and after a restart. A message of that birth that was never
// applied, and a copy whose content changed, cannot be proven: held
// (old_epoch).
func TestAReplayFromABirthOlderThanTheKeptOnesIsADuplicate(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		h := newHarness(t, memory.New())
		testReplayFromARetiredBirth(t, h, func() *harness { return h })
	})
	t.Run("memory group", func(t *testing.T) {
		open := memoryGroup(t)
		testReplayFromARetiredBirth(t, newHarness(t, open("a")), func() *harness { return newHarness(t, open("b")) })
	})
	t.Run("embedded, restarted", func(t *testing.T) {
		dir := t.TempDir()
		open := func() *harness {
			s, err := embedded.Open(dir, embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return newHarness(t, s)
		}
		h := open()
		testReplayFromARetiredBirth(t, h, func() *harness {
			h.e.Close()
			h.store.Close()
			return open()
		})
	})
	onSharedServers(t, func(t *testing.T, newGroup func() func(string) engine.Store) {
		open := newGroup()
		testReplayFromARetiredBirth(t, newHarness(t, open("a")), func() *harness { return newHarness(t, open("b")) })
	})
}

// testReplayFromARetiredBirth applies an edge's first birth and its data
// on h, then three newer sessions, and replays the first birth's messages
// to the harness replayTo returns.
func testReplayFromARetiredBirth(t *testing.T, h *harness, replayTo func() *harness) {
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 3)
	old := []sparkplug.Message{
		edge.Birth(c.next(), meterMetrics),
		edge.DeviceBirth("pump", c.next(), []sparkplug.Metric{{Name: "Node Control/State", Datatype: sparkplug.String, Value: "on"}}),
	}
	for range 4 {
		old = append(old, edge.Data(c.next(), pulse()))
	}
	old = append(old, edge.DeviceData("pump", c.next(), []sparkplug.Metric{{Name: "Node Control/State", Value: "off"}}))
	lost := edge.Data(c.next(), pulse()) // never delivered before the failover
	last := edge.Data(c.next(), pulse())
	old = append(old, last)
	h.expect(engine.Applied, old...)
	for range 3 { // window.keep_epochs 2: the first session's window leaves
		h.expect(engine.Applied, edge.Death(c.next()))
		edge.NewSession()
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
		h.expect(engine.Applied, edge.Data(c.next(), pulse()))
	}
	if r := h.source("m1"); r.Epoch != "6" {
		t.Fatalf("edge in epoch %s, want 6", r.Epoch)
	}

	r := replayTo()
	r.expect(engine.Duplicate, old...)
	changed := sparkplug.Message{Topic: last.Topic, Payload: setPulses(t, last.Payload, 5)}
	for _, m := range []sparkplug.Message{lost, changed} {
		d := r.expect(engine.Quarantined, m)
		if !strings.HasPrefix(d[0].Reason, engine.ReasonOldEpoch) {
			t.Errorf("%s: held (%s), want %s", m.Topic, d[0].Reason, engine.ReasonOldEpoch)
		}
	}
	if got := r.field("meter/m1", "pulses"); got != "8" { // 5 in the first session, 1 in each of the next three
		t.Fatalf("pulses %s, want 8", got)
	}
	if got := r.field("dev/m1/pump", "state"); got != `"off"` {
		t.Fatalf("pump %s, want off", got)
	}
}

// setPulses sets the value of an NDATA's only metric.
func setPulses(t *testing.T, payload []byte, v uint64) []byte {
	t.Helper()
	var p pb.Payload
	if err := proto.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	p.Metrics[0].Value = &pb.Payload_Metric_LongValue{LongValue: v}
	b, err := proto.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
