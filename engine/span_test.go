package engine_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// A window keeps the span it was opened with when sequence_span changes,
// and a new epoch opens at the new span. Raised, the engine used to index
// past the narrower stored bitmap and panic; lowered, it read the stored
// bitmap at the wrong offsets and took sequence 90, never seen, for a
// duplicate of 26.
func TestAWindowKeepsItsSpanWhenSequenceSpanChanges(t *testing.T) {
	msg := func(boot, seq int) engine.Message {
		return inc("fd", "e1", boot, seq, `"incident_id":"7","casualty_delta":1`)
	}
	for _, c := range []struct{ before, after int }{{64, 4096}, {4096, 64}} {
		store := memory.New()
		open := func(span int) *engine.Engine {
			e, err := engine.New(context.Background(), store, engine.Options{Routes: []engine.Route{incidentRoute}, SequenceSpan: span})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		e := open(c.before)
		var first []engine.Message
		for seq := 1; seq <= 100; seq++ {
			if seq != 90 { // a gap inside the window
				first = append(first, msg(1, seq))
			}
		}
		if _, err := e.Process(context.Background(), first); err != nil {
			t.Fatal(err)
		}
		e.Close()

		e = open(c.after)
		got := ""
		for _, m := range []engine.Message{msg(1, 100), msg(1, 90), msg(1, 5000), msg(1, 4990), msg(1, 101), msg(2, 1), msg(2, 3000), msg(2, 1000)} {
			ds, err := e.Process(context.Background(), []engine.Message{m})
			if err != nil {
				t.Fatal(err)
			}
			got += ds[0].Outcome.String() + " "
		}
		e.Close()
		// The window's span decides 4990 after 5000 and 101 after it; boot
		// 2 opens at the new span, which decides 1000 after 3000.
		want := map[[2]int]string{
			{64, 4096}: "duplicate applied_late applied applied_late quarantined applied applied applied_late ",
			{4096, 64}: "duplicate applied_late applied applied_late quarantined applied applied quarantined ",
		}[[2]int{c.before, c.after}]
		if got != want {
			t.Errorf("span %d, then %d: %s, want %s", c.before, c.after, got, want)
		}
	}
}
