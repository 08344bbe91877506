package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source/mqtt"
)

// scriptedAdopter hands over, round after round, the adoptions of rounds
// in turn (the last one again once they run out).
// It notes the wait each claim asked for (lost).
type scriptedAdopter struct {
	rounds [][]engine.Adoption
	n      int
	lost   []time.Duration
}

func (s *scriptedAdopter) ClaimAdoptions(_ context.Context, _ string, lost time.Duration) ([]engine.Adoption, error) {
	r := s.rounds[min(s.n, len(s.rounds)-1)]
	s.n++
	s.lost = append(s.lost, lost)
	return r, nil
}

func (s *scriptedAdopter) ShareAdopted(context.Context, engine.Adoption) (bool, error) {
	return true, nil
}

func (s *scriptedAdopter) ReleaseAdoption(context.Context, string) error { return nil }

type runnerFunc func(ctx context.Context) error

func (f runnerFunc) Run(ctx context.Context) error { return f(ctx) }

// A member that took its session back from its adoption (it returned: a
// member cut off from its store that renewed its lease, or the other
// members of a group whose whole store was out, adopted as it came back)
// is adopted again once it is gone again after its lease was live: its
// process, and so its lease holder, is the same, but the store no longer
// handed it over in between. Only while the store goes on handing it
// over, its lease never renewed, is it left alone.
func TestAMemberThatReturnedIsAdoptedOnceGoneAgain(t *testing.T) {
	gone := engine.Adoption{Member: "m2", Group: "g", ClientID: "client-m2", Holder: "host:1:m2"}
	store := &scriptedAdopter{rounds: [][]engine.Adoption{
		{gone}, // gone: adopted, and it takes its session back
		{gone}, // still handed over, its lease not renewed: left alone
		{},     // its lease renewed: it is back
		{gone}, // gone again (killed): adopted
	}}
	var logs testbroker.SyncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the adopter's log:\n%s", logs.String())
		}
	})
	reg := prometheus.NewRegistry()
	adoptions := 0
	a := &adopter{group: "g", store: store, every: time.Hour, base: adoptTestConfig("mqtt://127.0.0.1:1", "client-m1", "g"),
		ready: func() bool { return true },
		consumer: func(cfg mqtt.Config, _ mqtt.Processor) (runner, error) {
			adoptions++
			n := adoptions
			return runnerFunc(func(context.Context) error {
				if n == 1 {
					return mqtt.ErrTakenOver
				}
				return nil
			}), nil
		},
		log: slog.New(slog.NewTextHandler(&logs, nil)), met: metrics.New(reg, "test", "").Adoptions(reg)}
	want := []int{1, 1, 1, 2}
	for i, w := range want {
		a.round(t.Context())
		if adoptions != w {
			t.Fatalf("after round %d the adopter ran %d adoptions of the gone member's session, want %d", i+1, adoptions, w)
		}
	}
}

// A member that lost its broker and took its session back from its
// adoption is not adopted again for the same loss, but is for a loss
// after it: its lease holder is the same, the loss time is not. And an
// adopter asks for members lost for mqtt.adopt_lost_after only once its
// own connection has been up for as long: before, it asks for the gone
// members alone (a wait of 0).
func TestAMemberLostAgainIsAdoptedAgainAndOnlyByAMemberUpForTheWait(t *testing.T) {
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lost := engine.Adoption{Member: "m2", Group: "g", ClientID: "client-m2", Holder: "host:1:m2", Lost: first}
	again := lost
	again.Lost = first.Add(time.Minute)
	store := &scriptedAdopter{rounds: [][]engine.Adoption{
		{},      // this member's connection up for less than the wait
		{lost},  // lost: adopted, and it takes its session back
		{lost},  // the same loss still handed over: left alone
		{again}, // lost again, never handed over in between: adopted
	}}
	reg := prometheus.NewRegistry()
	adoptions := 0
	up := time.Second
	a := &adopter{group: "g", store: store, every: time.Hour, base: adoptTestConfig("mqtt://127.0.0.1:1", "client-m1", "g"),
		ready: func() bool { return true }, lostWait: 3 * time.Second, upFor: func() time.Duration { return up },
		consumer: func(cfg mqtt.Config, _ mqtt.Processor) (runner, error) {
			adoptions++
			return runnerFunc(func(context.Context) error { return mqtt.ErrTakenOver }), nil
		},
		log: slog.New(slog.DiscardHandler), met: metrics.New(reg, "test", "").Adoptions(reg)}
	a.round(t.Context())
	if store.lost[0] != 0 {
		t.Fatalf("with its own connection up for %v the adopter asked for members lost for %v, want 0 (the gone alone)", up, store.lost[0])
	}
	up = 3 * time.Second
	for i, w := range []int{1, 1, 2} {
		a.round(t.Context())
		if adoptions != w {
			t.Fatalf("after round %d the adopter ran %d adoptions of the lost member's session, want %d", i+2, adoptions, w)
		}
	}
	for i, l := range store.lost[1:] {
		if l != 3*time.Second {
			t.Fatalf("claim %d asked for members lost for %v, want the wait, 3s", i+2, l)
		}
	}
}
