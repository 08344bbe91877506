package app

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source/mqtt"
)

// handingStore hands over what handed says, each time it is asked.
type handingStore struct{ handed func() []engine.Adoption }

func (s *handingStore) ClaimAdoptions(context.Context, string, time.Duration) ([]engine.Adoption, error) {
	return s.handed(), nil
}
func (s *handingStore) ShareAdopted(context.Context, engine.Adoption) (bool, error) { return true, nil }
func (s *handingStore) ReleaseAdoption(context.Context, string) error               { return nil }

// TestARoundAsksAgainBeforeEachAdoption: a round claims the sessions of
// members b and c, both cut off from their broker. While b's session
// drains, c comes back (the store no longer hands it over), or this
// member's own connection drops: the round does not go on to take c's
// session, which c is using again, or which this member cannot tell is
// not its broker's outage for everyone. Where nothing changed, it does.
func TestARoundAsksAgainBeforeEachAdoption(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := engine.Adoption{Member: "b", Group: "g", ClientID: "client-b", Holder: "h:b", Lost: at}
	c := engine.Adoption{Member: "c", Group: "g", ClientID: "client-c", Holder: "h:c", Lost: at}
	for _, tc := range []struct {
		name          string
		cBack, ownOff bool
		want          []string
	}{
		{"c joined again while b drained", true, false, []string{"client-b"}},
		{"this member's connection dropped while b drained", false, true, []string{"client-b"}},
		{"nothing changed", false, false, []string{"client-b", "client-c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cBack, ownUp := false, true
			store := &handingStore{handed: func() []engine.Adoption {
				if cBack {
					return []engine.Adoption{b}
				}
				return []engine.Adoption{b, c}
			}}
			var connected []string
			reg := prometheus.NewRegistry()
			a := &adopter{group: "g", store: store, every: time.Hour, base: adoptTestConfig("mqtt://127.0.0.1:1", "client-a", "g"),
				ready: func() bool { return ownUp }, lostWait: time.Second,
				upFor: func() time.Duration { return map[bool]time.Duration{true: time.Hour}[ownUp] },
				consumer: func(cfg mqtt.Config, _ mqtt.Processor) (runner, error) {
					return runnerFunc(func(context.Context) error {
						connected = append(connected, cfg.ClientID)
						if cfg.ClientID == "client-b" {
							cBack, ownUp = tc.cBack, !tc.ownOff
						}
						return nil
					}), nil
				},
				log: slog.New(slog.DiscardHandler), met: metrics.New(reg, "test", "").Adoptions(reg)}
			a.round(t.Context())
			if !slices.Equal(connected, tc.want) {
				t.Fatalf("the round connected as %v, want %v", connected, tc.want)
			}
		})
	}
}
