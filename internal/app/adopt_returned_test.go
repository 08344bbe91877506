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
type scriptedAdopter struct {
	rounds [][]engine.Adoption
	n      int
}

func (s *scriptedAdopter) ClaimAdoptions(context.Context, string, time.Duration) ([]engine.Adoption, error) {
	r := s.rounds[min(s.n, len(s.rounds)-1)]
	s.n++
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
