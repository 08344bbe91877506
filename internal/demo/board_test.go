package demo

import (
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/replayguard/replayguard/forward"
)

// cleanCopyOf is a forwarded copy of m as the COP broker delivers it: the
// report's bytes, keyed by key ("" for none).
func cleanCopyOf(m feedMsg, key string) paho.PublishReceived {
	p := &paho.Publish{QoS: 1, Topic: "clean/" + m.topic, Payload: m.payload, Properties: &paho.PublishProperties{}}
	if key != "" {
		p.Properties.User = paho.UserProperties{{Key: forward.HeaderKey, Value: key}, {Key: forward.HeaderRoute, Value: "incidents"}}
	}
	return paho.PublishReceived{Packet: p}
}

func TestTheDispatchBoardAppliesEachKeyOnce(t *testing.T) {
	s := newStoryNamed(StoryIncident)
	casualties := s.held[2] // fire/ic-7 #1: 2 casualties
	tests := []struct {
		name              string
		copies            []paho.PublishReceived
		wantCasualties    string
		keys, repeats, nk int
	}{
		{"one copy of a key is applied", []paho.PublishReceived{cleanCopyOf(casualties, "k1")}, "2", 1, 0, 0},
		{"a copy sent again under its key is skipped",
			[]paho.PublishReceived{cleanCopyOf(casualties, "k1"), cleanCopyOf(casualties, "k1")}, "2", 1, 1, 0},
		{"two keys are two reports, even with the same bytes",
			[]paho.PublishReceived{cleanCopyOf(casualties, "k1"), cleanCopyOf(casualties, "k2")}, "4", 2, 0, 0},
		{"a copy without a key is counted, not applied",
			[]paho.PublishReceived{cleanCopyOf(casualties, "")}, "", 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTally()
			b := newBoard(subscriberConfig{}, tl, s)
			for _, c := range tt.copies {
				b.receive(c, "tcp://cop")
			}
			if got := b.picture()["incident/7"]["casualties"]; got != tt.wantCasualties {
				t.Errorf("casualties = %q, want %q", got, tt.wantCasualties)
			}
			keys, _ := tl.outcome(boardApplied)
			repeats, _ := tl.outcome(boardRepeat)
			unkeyed, _ := tl.outcome(boardUnkeyed)
			if keys != tt.keys || repeats != tt.repeats || unkeyed != tt.nk {
				t.Errorf("keys, repeats, unkeyed = %d, %d, %d; want %d, %d, %d", keys, repeats, unkeyed, tt.keys, tt.repeats, tt.nk)
			}
			if got := tl.total().deliveries; got != len(tt.copies) {
				t.Errorf("%d deliveries counted, want %d", got, len(tt.copies))
			}
			if !tl.quiet(0) {
				t.Error("a copy is still in hand after receive returned")
			}
		})
	}
}
