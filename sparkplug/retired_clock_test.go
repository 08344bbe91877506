package sparkplug_test

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// TestARetiredBirthOutlivesAWallClockStepAsItsKeysDo: the key window of a
// single-owner engine ages by the time elapsed, not by a step of the wall
// clock (NTP after a VM resumes). An edge's retired birth is forgotten by
// the same clock: after the wall clock stepped three hours forward (more
// than window.ttl) while a minute elapsed, the next NBIRTH keeps it, and a
// replay of its messages, whose keys the key window still holds, is a
// duplicate. Once window.ttl has really elapsed it is forgotten, and they
// are held.
func TestARetiredBirthOutlivesAWallClockStepAsItsKeysDo(t *testing.T) {
	var elapsed time.Duration
	h := newHarnessWith(t, nil, func(o *engine.Options) { o.Elapsed = func() time.Duration { return elapsed } })
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	old := []sparkplug.Message{edge.Birth(c.next(), meterMetrics)}
	for range 4 {
		old = append(old, edge.Data(c.next(), pulse()))
	}
	h.expect(engine.Applied, old...)
	newSession := func() {
		h.expect(engine.Applied, edge.Death(c.next()))
		edge.NewSession()
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
	}
	for range 3 { // window.keep_epochs 2: the first birth retires
		newSession()
	}
	h.expect(engine.Duplicate, old...)
	h.clock = h.clock.Add(3 * time.Hour) // the wall clock steps
	elapsed += time.Minute
	newSession()
	h.expect(engine.Duplicate, old...)
	h.clock = h.clock.Add(engine.DefaultTTL)
	elapsed += engine.DefaultTTL
	newSession()
	h.expect(engine.Quarantined, old...)
	if got := h.field("meter/m1", "pulses"); got != "4" {
		t.Fatalf("pulses %s, want 4", got)
	}
}
