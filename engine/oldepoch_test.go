package engine_test

import (
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAReplayFromAnEpochOlderThanTheKeptOnesIsADuplicateWhileItsKeyIsInTheWindow:
// the key window decides before the source window, so a replay from an
// epoch older than window.keep_epochs + 1 back whose key it holds with the
// same content is a duplicate, whatever the epoch's age; with other
// content it is a conflict; a sequence of that epoch never applied is held
// (old_epoch). On a single-owner store, after a restart, and on another
// member of a consumer group.
func TestAReplayFromAnEpochOlderThanTheKeptOnesIsADuplicateWhileItsKeyIsInTheWindow(t *testing.T) {
	newEngine := func(t *testing.T, s engine.Store) *engine.Engine {
		e, err := engine.New(t.Context(), s, engine.Options{Routes: []engine.Route{incidentRoute}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	msg := func(boot, seq, delta int) engine.Message {
		return inc("fd", "e1", boot, seq, `"incident_id":"7","casualty_delta":`+string(rune('0'+delta)))
	}
	type replay struct {
		name    string
		msg     engine.Message
		outcome engine.Outcome
		reason  string
	}
	replays := []replay{
		{"an applied message again", msg(1, 2, 1), engine.Duplicate, ""},
		{"an applied message's key with other content", msg(1, 2, 3), engine.Conflict, ""},
		{"a sequence never applied", msg(1, 9, 1), engine.Quarantined, engine.ReasonOldEpoch},
	}
	check := func(t *testing.T, apply *engine.Engine, replayTo func() *engine.Engine) {
		for seq := 1; seq <= 3; seq++ {
			mustProcess(t, apply, msg(1, seq, 1))
		}
		for boot := 2; boot <= 4; boot++ { // window.keep_epochs 2: epoch 1's window leaves
			mustProcess(t, apply, msg(boot, 1, 1))
		}
		e := replayTo()
		for _, r := range replays {
			d := mustProcess(t, e, r.msg)
			if d.Outcome != r.outcome || r.reason != "" && d.Reason != r.reason {
				t.Errorf("%s: %s (%s), want %s %s", r.name, d.Outcome, d.Reason, r.outcome, r.reason)
			}
		}
	}
	t.Run("memory", func(t *testing.T) {
		e := newEngine(t, memory.New())
		check(t, e, func() *engine.Engine { return e })
	})
	t.Run("embedded, restarted", func(t *testing.T) {
		dir := t.TempDir()
		open := func() *embedded.Store {
			s, err := embedded.Open(dir, embedded.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		s := open()
		e := newEngine(t, s)
		check(t, e, func() *engine.Engine {
			e.Close()
			s.Close()
			return newEngine(t, open())
		})
	})
	t.Run("another member of a group", func(t *testing.T) {
		g := memory.NewGroup(0, 10_000)
		a, err := g.Open("a")
		if err != nil {
			t.Fatal(err)
		}
		b, err := g.Open("b")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(); b.Close() })
		check(t, newEngine(t, a), func() *engine.Engine { return newEngine(t, b) })
	})
}

func mustProcess(t *testing.T, e *engine.Engine, m engine.Message) engine.Decision {
	t.Helper()
	d, err := e.Process(t.Context(), []engine.Message{m})
	if err != nil {
		t.Fatal(err)
	}
	return d[0]
}
