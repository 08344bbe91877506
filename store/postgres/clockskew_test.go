package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestSetOrderIgnoresAMembersClock: on an unsequenced route the set
// applied last wins in a group, though the member that applied the one
// before runs an hour ahead.
func TestSetOrderIgnoresAMembersClock(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	routes := []engine.Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "site/1", Set: map[string]string{"kw": "kw"}}}}}
	var es []*engine.Engine
	for _, m := range []struct {
		id   string
		skew time.Duration
	}{{"ahead", time.Hour}, {"right", 0}} {
		s, err := g.open(m.id)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(t.Context(), s, engine.Options{Routes: routes, Now: func() time.Time { return time.Now().Add(m.skew) }})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		es = append(es, e)
	}
	for i, kw := range []string{"5", "7"} {
		msg := engine.Message{Topic: "plant/m3/energy", Payload: []byte(`{"msgId":"r-` + kw + `","kw":` + kw + `}`)}
		if _, err := es[i].Process(context.Background(), []engine.Message{msg}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := es[1].ReadState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Fields.Get("kw").Num != "7" {
		t.Fatalf("state %+v: want kw 7, the set applied last", st)
	}
}
