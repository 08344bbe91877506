package redis

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAMemberWhoseWallClockStepsKeepsTheGroupsKeys: the group's keys age
// by the server's clock, not by a member's wall clock. A member whose wall
// clock steps forward past window.ttl still finds the replay of a key
// another member applied a moment ago a duplicate, and so does a member
// replaying a key that one whose wall clock runs behind by more than
// window.ttl applied.
func TestAMemberWhoseWallClockStepsKeepsTheGroupsKeys(t *testing.T) {
	const ttl = 30 * time.Minute
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	g := newGroup(srv)
	routes := []engine.Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}}
	var step [3]atomic.Int64 // each member's wall clock less the real time
	es := make([]*engine.Engine, 3)
	for i, id := range []string{"m1", "m2", "m3"} {
		s := g.must(t, id, func(o *Options) { o.TTL = ttl })
		e, err := engine.New(t.Context(), s, engine.Options{Routes: routes, TTL: ttl,
			Now: func() time.Time { return time.Now().Add(time.Duration(step[i].Load())) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		es[i] = e
	}
	reading := func(id string) engine.Message {
		return engine.Message{Topic: "plant/m3/energy", Payload: []byte(`{"msgId":"` + id + `","kwh":0.25}`)}
	}
	decide := func(i int, m engine.Message) engine.Outcome {
		t.Helper()
		ds, err := es[i].Process(context.Background(), []engine.Message{m})
		if err != nil {
			t.Fatal(err)
		}
		return ds[0].Outcome
	}
	t.Run("a replay on the member whose clock stepped forward past the ttl is a duplicate", func(t *testing.T) {
		if got := decide(0, reading("r-1")); got != engine.Applied {
			t.Fatalf("first copy on m1: %s", got)
		}
		step[1].Store(int64(2 * time.Hour))
		if got := decide(1, reading("r-1")); got != engine.Duplicate {
			t.Fatalf("replay on m2, whose wall clock stepped 2h forward a moment after m1 applied it: %s, want duplicate", got)
		}
	})
	t.Run("a replay of a key a member whose clock runs behind by more than the ttl applied is a duplicate", func(t *testing.T) {
		step[2].Store(int64(-2 * time.Hour))
		if got := decide(2, reading("r-2")); got != engine.Applied {
			t.Fatalf("first copy on m3: %s", got)
		}
		if got := decide(0, reading("r-2")); got != engine.Duplicate {
			t.Fatalf("replay on m1 of the key m3 applied a moment ago: %s, want duplicate", got)
		}
	})
	st, err := es[0].ReadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Fields.Get("kwh").Num != "0.5" {
		t.Fatalf("state %+v: want meter/m3 kwh 0.5, two readings applied once each", st)
	}
}
