package audit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// clockFeed decides readings stamped by a wall clock it steps at will,
// while the time that really elapses is counted apart, on a single-owner
// store or as a member of a group; retention measures max_age on an
// AgeClock over both, as a process gives its retention.
type clockFeed struct {
	wall    time.Time
	elapsed time.Duration
	ages    *audit.AgeClock
	decide  func(t *testing.T, n int)
	trim    func(t *testing.T, dir string, maxAge time.Duration) audit.TrimResult
	next    int
}

// tick moves both clocks on by d, as time passing does.
func (f *clockFeed) tick(d time.Duration) { f.wall, f.elapsed = f.wall.Add(d), f.elapsed+d }

func newClockFeed(t *testing.T, group bool) *clockFeed {
	f := &clockFeed{wall: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	wall := func() time.Time { return f.wall }
	f.ages = audit.NewAgeClock(wall, func() time.Duration { return f.elapsed })
	f.ages.Read() // the process's start
	var e *engine.Engine
	var err error
	var retain func(opts audit.RetentionOptions) (*audit.Retention, error)
	if group {
		g := memory.NewGroup(0, 0)
		m, merr := g.Open("m1")
		if merr != nil {
			t.Fatal(merr)
		}
		t.Cleanup(func() { m.Close() })
		e, err = engine.New(t.Context(), m, engine.Options{Routes: meters, Now: wall})
		retain = func(opts audit.RetentionOptions) (*audit.Retention, error) {
			opts.Member = "m1"
			return audit.NewChainRetention(m, opts)
		}
	} else {
		st := memory.New()
		e, err = engine.New(t.Context(), st, engine.Options{Routes: meters, Now: wall})
		retain = func(opts audit.RetentionOptions) (*audit.Retention, error) { return audit.NewRetention(st, opts) }
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	f.decide = func(t *testing.T, n int) {
		t.Helper()
		msgs := make([]engine.Message, n)
		for i := range msgs {
			msgs[i] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d","kwh":0.25}`, f.next)}
			f.next++
		}
		if _, err := e.Process(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	var r *audit.Retention // one for the feed's chain, as a process has
	f.trim = func(t *testing.T, dir string, maxAge time.Duration) audit.TrimResult {
		t.Helper()
		if r == nil {
			r, err = retain(audit.RetentionOptions{Archive: dir, MaxAge: maxAge, Now: wall, Ages: f.ages,
				Head: func(context.Context) (uint64, error) { return e.Stats().Position, nil }})
			if err != nil {
				t.Fatal(err)
			}
		}
		res, err := r.Once(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	return f
}

// TestAgeRetentionIsNotMovedByAStepOfTheWallClock: a record leaves once
// max_age has elapsed since it was stamped, neither before nor (by more
// than the passes' interval) after, whichever way the wall clock that
// stamps the records steps: forward (by the wall clock every record
// stamped before the step would age by it at once) or back (by the wall
// clock, the records stamped before the step would stay longer by it; and
// those stamped after it carry times behind those before it). Retention
// runs a pass every so often, as run does, one before each step.
func TestAgeRetentionIsNotMovedByAStepOfTheWallClock(t *testing.T) {
	for _, group := range []bool{false, true} {
		where := "on a single-owner store"
		if group {
			where = "on a member's chain of a group"
		}
		t.Run(where+", a step forward", func(t *testing.T) {
			f, dir := newClockFeed(t, group), t.TempDir()
			f.decide(t, 100) // 1..100, at 0
			f.tick(30 * time.Minute)
			f.decide(t, 100) // 101..200, at 30m
			if res := f.trim(t, dir, time.Hour); res.Base.Position != 0 {
				t.Fatalf("an hour's retention trimmed to %d with the records 30 minutes old at most", res.Base.Position)
			}
			f.wall = f.wall.Add(2 * time.Hour)
			f.tick(time.Minute)
			if res := f.trim(t, dir, time.Hour); res.Base.Position != 0 {
				t.Fatalf("an hour's retention trimmed to %d after the wall clock stepped 2h forward, the records 31 and 1 minutes old; want none trimmed", res.Base.Position)
			}
			f.decide(t, 100) // 201..300, stamped 2h ahead
			f.tick(28 * time.Minute)
			if res := f.trim(t, dir, time.Hour); res.Base.Position != 0 {
				t.Fatalf("an hour's retention trimmed to %d with 1..100 59 minutes old; want none trimmed", res.Base.Position)
			}
			f.tick(2 * time.Minute)
			if res := f.trim(t, dir, time.Hour); res.Base.Position != 100 {
				t.Fatalf("an hour's retention trimmed to %d; want 100: 1..100 are 61 minutes old, 101..200 31", res.Base.Position)
			}
			f.tick(30 * time.Minute)
			if res := f.trim(t, dir, time.Hour); res.Base.Position != 200 {
				t.Fatalf("an hour's retention trimmed to %d; want 200: 101..200 are 61 minutes old, 201..300 60, stamped 2h ahead", res.Base.Position)
			}
		})
		t.Run(where+", a step back", func(t *testing.T) {
			f, dir := newClockFeed(t, group), t.TempDir()
			f.decide(t, 100) // 1..100, at 0
			f.tick(time.Hour)
			if res := f.trim(t, dir, 2*time.Hour); res.Base.Position != 0 {
				t.Fatalf("two hours' retention trimmed to %d with the records an hour old", res.Base.Position)
			}
			f.wall = f.wall.Add(-2 * time.Hour)
			f.decide(t, 100) // 101..200, an hour after 1..100, stamped an hour before them
			f.tick(59 * time.Minute)
			if res := f.trim(t, dir, 2*time.Hour); res.Base.Position != 0 {
				t.Fatalf("two hours' retention trimmed to %d with 1..100 1h59m old, 101..200 59 minutes; want none trimmed", res.Base.Position)
			}
			f.tick(2 * time.Minute)
			if res := f.trim(t, dir, 2*time.Hour); res.Base.Position != 100 {
				t.Fatalf("two hours' retention trimmed to %d after the wall clock stepped 2h back; want 100: 1..100 are 2h01m old, 101..200 1h01m, stamped 1h before 1..100", res.Base.Position)
			}
			f.tick(58 * time.Minute)
			if res := f.trim(t, dir, 2*time.Hour); res.Base.Position != 100 {
				t.Fatalf("two hours' retention trimmed to %d with 101..200 1h59m old; want 100", res.Base.Position)
			}
			f.tick(2 * time.Minute)
			if res := f.trim(t, dir, 2*time.Hour); res.Base.Position != 200 {
				t.Fatalf("two hours' retention trimmed to %d with 101..200 2h01m old; want 200", res.Base.Position)
			}
		})
	}
}
