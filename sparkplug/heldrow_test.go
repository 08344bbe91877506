package sparkplug_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// TestAnEdgeRowStaysBoundedThroughHeldBirthsAndReplays: a long-lived edge
// whose every session has an NBIRTH and a DBIRTH held (malformed) after
// its good ones, data held after them, and a broker failover that
// replays the whole session (duplicates, and the held messages held
// again), then an NDEATH and its replay, and replays of a session long
// retired. Its row keeps window.keep_epochs + 1 births, as many retired,
// as many NDEATH records and device tables: the held messages and their
// replays leave no more on it, so the row is no larger after 60 sessions
// than after 30, but for the numbers that grow in it.
func TestAnEdgeRowStaysBoundedThroughHeldBirthsAndReplays(t *testing.T) {
	onEveryStore(t, testAnEdgeRowStaysBoundedThroughHeldBirthsAndReplays)
}

func testAnEdgeRowStaysBoundedThroughHeldBirthsAndReplays(t *testing.T, store engine.Store) {
	h := newHarness(t, store)
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	swapped := []sparkplug.Metric{
		{Name: "Energy", Alias: 1, Datatype: sparkplug.Double, Value: 0.0},
		{Name: "Pulses", Alias: 3, Datatype: sparkplug.Int64, Value: int64(0)},
		{Name: "Temperature", Alias: 3, Datatype: sparkplug.Int32, Value: int64(20)},
	}
	var sessions [][]sparkplug.Message // each session's messages, in order
	sizes := map[int]int{}
	keep := engine.DefaultKeepEpochs + 1
	for s := range 60 {
		birth := edge.Birth(c.next(), meterMetrics)
		dbirth := edge.DeviceBirth("d1", c.next(), meterMetrics)
		data := []sparkplug.Message{edge.Data(c.next(), pulse()), edge.DeviceData("d1", c.next(), pulse())}
		h.expect(engine.Applied, birth, dbirth)
		h.expect(engine.Applied, data...)
		badDevice := edge.DeviceBirth("d1", c.next(), swapped)
		h.expect(engine.Malformed, badDevice)
		heldDevice := edge.DeviceData("d1", c.next(), pulse())
		h.expect(engine.Quarantined, heldDevice)
		bad := edge.Birth(c.next(), swapped)
		h.expect(engine.Malformed, bad)
		held := edge.Data(c.next(), pulse())
		h.expect(engine.Quarantined, held)
		// A failover: the broker sends the session again.
		h.expect(engine.Duplicate, birth, dbirth)
		h.expect(engine.Duplicate, data...)
		h.expect(engine.Malformed, badDevice, bad)
		h.expect(engine.Quarantined, heldDevice, held)
		death := edge.Death(c.next())
		h.expect(engine.Applied, death)
		h.expect(engine.Duplicate, death)
		sessions = append(sessions, []sparkplug.Message{birth, dbirth, data[0], data[1], death})
		if s >= 2*keep { // a session long retired, sent again
			for _, m := range sessions[s-2*keep] {
				out := h.send(m)
				if o := out[0].Outcome; o.Effective() {
					t.Fatalf("session %d: replay of %s of session %d: %s (%s)", s, m.Topic, s-2*keep, o, out[0].Reason)
				}
			}
		}
		edge.NewSession()
		st, size := h.row()
		if len(st.Births) > keep || len(st.Retired) > keep || len(st.Deaths) > keep {
			t.Fatalf("session %d: %d births, %d retired, %d deaths, want at most %d each", s, len(st.Births), len(st.Retired), len(st.Deaths), keep)
		}
		for _, b := range append(st.Births, st.Retired...) {
			for name, dev := range b.Devices {
				if len(dev.Earlier) > keep {
					t.Fatalf("session %d: birth %s: device %s keeps %d earlier tables, want at most %d", s, b.Epoch, name, len(dev.Earlier), keep)
				}
			}
		}
		sizes[s] = size
	}
	t.Logf("row %d bytes after 10 sessions, %d after 30, %d after 60", sizes[9], sizes[29], sizes[59])
	if sizes[59] > sizes[29]+64 {
		t.Fatalf("the edge's row is %d bytes after 30 sessions and %d after 60", sizes[29], sizes[59])
	}
}

// row is the edge's session and the size of its source row.
func (h *harness) row() (*engine.SparkplugState, int) {
	h.t.Helper()
	var st *engine.SparkplugState
	n := 0
	read := func(s engine.SourceState) error {
		row, err := s.MarshalBinary()
		n, st = len(row), s.Sparkplug
		return err
	}
	var err error
	if scan, ok := h.store.(engine.RowScanner); ok { // a group's store
		err = scan.ScanSources(context.Background(), read)
	} else {
		var snap *engine.Snapshot
		if snap, err = h.store.Load(context.Background()); err == nil && len(snap.Sources) == 1 {
			err = read(snap.Sources[0])
		}
	}
	if err != nil || st == nil {
		h.t.Fatalf("the edge's row: %v (%v)", err, st)
	}
	return st, n
}
