package engine

import (
	"strconv"
	"testing"
)

// A store written with a larger window.keep_epochs than the one run with
// now holds more older windows than keep: an older epoch decided after a
// newer one, placed among them, must not index past the windows kept.
func TestAnOlderEpochAmongMoreWindowsThanKeptIsNotOutOfRange(t *testing.T) {
	s := &SourceState{}
	for _, ep := range []int64{4, 6, 8, 10} { // kept with keep_epochs 3
		s.checkSequence(&Delivery{epoch: strconv.FormatInt(ep, 10), epochNum: true, epochInt: ep, seq: 0}, 64, 3, false)
	}
	if len(s.Epochs) != 4 {
		t.Fatalf("windows = %d, want 4", len(s.Epochs))
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("deciding epoch 5 with keep_epochs 1 panicked: %v", r)
		}
	}()
	v := s.checkSequence(&Delivery{epoch: "5", epochNum: true, epochInt: 5, seq: 0, older: true}, 64, 1, false)
	if v.outcome != Quarantined || v.reason != reasonOldEpoch {
		t.Errorf("epoch 5 older than every window kept at keep_epochs 1: got %v (%s), want quarantined (%s)", v.outcome, v.reason, reasonOldEpoch)
	}
}
