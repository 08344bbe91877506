package sparkplug_test

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// TestDataHeldAfterALaterSessionsNDEATHNamesThatNDEATH: an NDEATH whose
// bdSeq is a later session's than the edge's current birth (the Will of a
// connection that died before its NBIRTH) ends the current one: the edge
// is offline, and its data above the session's highest waits for the next
// NBIRTH. The reason says which NDEATH came, that later session's, not
// the current session's, which never came.
func TestDataHeldAfterALaterSessionsNDEATHNamesThatNDEATH(t *testing.T) {
	onEveryStore(t, func(t *testing.T, store engine.Store) {
		h := newHarness(t, store)
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 3)
		h.expect(engine.Applied, edge.Birth(c.next(), meterMetrics), edge.Data(c.next(), pulse()))
		h.expect(engine.Applied, sparkplug.NewEdge("plant", "m1", 7).Death(c.next()))
		d := h.expect(engine.Quarantined, edge.Data(c.next(), pulse()))
		want := `seq 2 cannot be placed: edge "m1" is offline (an NDEATH of its later session 7 came, whose NBIRTH is not decided) ` +
			`and it would come after session 3's highest, 1 (seq 1): it waits for the next NBIRTH`
		if d[0].Reason != want {
			t.Fatalf("reason %q, want %q", d[0].Reason, want)
		}
		if strings.Contains(d[0].Reason, "session 3's NDEATH") {
			t.Fatal("the reason names an NDEATH that never came")
		}
	})
}
