package app

import (
	"testing"

	"github.com/replayguard/replayguard/source/mqtt"
	"github.com/replayguard/replayguard/source/mqtt3"
)

func TestMQTT311EventsReachTheMetricsUnderTheirNames(t *testing.T) {
	for k := mqtt3.EventKind(0); k.String() != "unknown"; k++ {
		var got []mqtt.Event
		observer3{mqtt.ObserverFunc(func(e mqtt.Event) { got = append(got, e) })}.Observe(mqtt3.Event{Kind: k, N: 3, Broker: "b"})
		if len(got) != 1 || got[0].Kind.String() != k.String() || got[0].N != 3 || got[0].Broker != "b" {
			t.Errorf("%v became %+v", k, got)
		}
	}
}
