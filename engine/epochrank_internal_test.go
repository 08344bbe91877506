package engine

import "testing"

// TestAnEpochIsNewOnlyAboveEveryKeptRank: windows a build before the rank
// rule left out of order (boots 100, "s" ranked 101, then 5, taken as new).
// An integer epoch is new only above the highest rank kept, 101, not the
// current window's 5: boot 6, applied, would have its `set` writes lose to
// those "s" made. A string epoch opens one above that rank.
func TestAnEpochIsNewOnlyAboveEveryKeptRank(t *testing.T) {
	src := func() *SourceState {
		return &SourceState{Seen: []string{"s"}, Epochs: []EpochWindow{
			{Epoch: "5", Numeric: true, Value: 5, High: 3, First: 0, Floor: -1},
			{Epoch: "s", Value: 101, High: 9, First: 0, Floor: -1},
			{Epoch: "100", Numeric: true, Value: 100, High: 9, First: 0, Floor: -1},
		}}
	}
	for _, c := range []struct {
		epoch string
		num   bool
		n     int64
		want  Outcome
		rank  int64
	}{
		{"6", true, 6, Quarantined, 0},
		{"101", true, 101, Quarantined, 0},
		{"102", true, 102, Applied, 102},
		{"t", false, 0, Applied, 102},
	} {
		s := src()
		v := s.checkSequence(&Delivery{epoch: c.epoch, epochNum: c.num, epochInt: c.n, seq: 0}, 64, 3, false)
		if v.outcome != c.want {
			t.Fatalf("epoch %q: %s (%s), want %s", c.epoch, v.outcome, v.reason, c.want)
		}
		if c.want == Applied && (v.epoch == nil || v.epoch.Value != c.rank) {
			t.Fatalf("epoch %q: window %+v, want rank %d", c.epoch, v.epoch, c.rank)
		}
	}
}
