package sparkplug_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/postgres"
	"github.com/replayguard/replayguard/store/redis"
)

// groups numbers the groups (Redis prefixes, PostgreSQL schemas) of the
// tests on shared servers.
var groups atomic.Int64

// onSharedServers runs test on a real Redis and a real PostgreSQL, each
// started for it; open opens a member of a group of its own on the server
// (one group per call of newGroup).
func onSharedServers(t *testing.T, test func(t *testing.T, newGroup func() func(member string) engine.Store)) {
	t.Run("redis", func(t *testing.T) {
		srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
		test(t, func() func(string) engine.Store {
			prefix := fmt.Sprintf("{sp%d}:", groups.Add(1))
			return func(member string) engine.Store {
				s, err := redis.Open(t.Context(), redis.Options{URL: srv.URL(), Member: member, Prefix: prefix})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		test(t, func() func(string) engine.Store {
			schema := fmt.Sprintf("sp%d", groups.Add(1))
			return func(member string) engine.Store {
				s, err := postgres.Open(t.Context(), postgres.Options{URL: pg.URL(), Member: member, Schema: schema, TTL: keyTTL})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
		})
	})
}

// TestAnNDEATHAppliedBeforeTheStorePrunesIsADuplicateAfter: a group's
// store prunes its keys by the wall clock (PostgreSQL every few seconds),
// and the harness decides at a fixed time in the past. An NDEATH has no
// sequence: its key alone makes its redelivery a duplicate. The key must
// outlive a pruning run between the two, as it does in a group whose
// members decide at the wall clock's time.
func TestAnNDEATHAppliedBeforeTheStorePrunesIsADuplicateAfter(t *testing.T) {
	onSharedServers(t, func(t *testing.T, newGroup func() func(string) engine.Store) {
		open := newGroup()
		a, b := newHarness(t, open("a")), newHarness(t, open("b"))
		c := newClock()
		edge := sparkplug.NewEdge("plant", "m1", 0)
		a.expect(engine.Applied, edge.Birth(c.next(), meterMetrics), edge.Data(c.next(), pulse()))
		death := edge.Death(c.next())
		a.expect(engine.Applied, death)
		if p, ok := a.store.(interface {
			Prune(context.Context) (int64, error)
		}); ok { // what the store's pruning task does every few seconds
			if _, err := p.Prune(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		b.expect(engine.Duplicate, death)
	})
}

// TestDataDecidedBeforeItsBirthIsAppliedOnce: shared subscriptions deal
// an edge's messages to any member, so one member can decide the first
// NDATA of a new birth (a rebirth, or a new session whose NDEATH is not
// decided either) while another still holds that birth's NBIRTH. The
// NDATA is then placed in the birth before, above its highest, and
// applied there. Once the NBIRTH is decided, the broker's redelivery of
// that NDATA must be its duplicate, not a second effect in its own birth.
func TestDataDecidedBeforeItsBirthIsAppliedOnce(t *testing.T) {
	onSharedServers(t, func(t *testing.T, newGroup func() func(string) engine.Store) {
		for _, tc := range nextBirths { // tc.next: what member a decides, after the data
			t.Run(tc.name, func(t *testing.T) {
				open := newGroup()
				a, b := newHarness(t, open("a")), newHarness(t, open("b"))
				c := newClock()
				edge := sparkplug.NewEdge("plant", "m1", 0)
				a.expect(engine.Applied, edge.Birth(c.next(), meterMetrics))
				for range 200 { // seq 1 … 200
					a.expect(engine.Applied, edge.Data(c.next(), pulse()))
				}
				held := tc.next(edge, c)             // member a holds these ...
				data := edge.Data(c.next(), pulse()) // ... while member b decides the data after them
				d := b.send(data)
				t.Logf("the data before its NBIRTH: %s (%s) in epoch %s at seq %d", d[0].Outcome, d[0].Reason, d[0].Epoch, d[0].Sequence)
				a.expect(engine.Applied, held...)
				for _, h := range []*harness{b, a} { // redelivered to either member
					if d := h.send(data); d[0].Outcome.Effective() {
						t.Errorf("the data redelivered after its NBIRTH: %s again, in epoch %s at seq %d", d[0].Outcome, d[0].Epoch, d[0].Sequence)
					}
				}
				if got := a.field("meter/m1", "pulses"); got != "201" {
					t.Fatalf("pulses %s, want 201: one NDATA had two effects", got)
				}
			})
		}
	})
}

// nextBirths are the two ways an edge's next birth comes: a rebirth of its
// session, and a new session after its NDEATH; next returns its messages.
var nextBirths = []struct {
	name string
	next func(e *sparkplug.Edge, c *clock) []sparkplug.Message
}{
	{"a rebirth", func(e *sparkplug.Edge, c *clock) []sparkplug.Message {
		return []sparkplug.Message{e.Birth(c.next(), meterMetrics)}
	}},
	{"a new session", func(e *sparkplug.Edge, c *clock) []sparkplug.Message {
		death := e.Death(c.next())
		e.NewSession()
		return []sparkplug.Message{death, e.Birth(c.next(), meterMetrics)}
	}},
}
