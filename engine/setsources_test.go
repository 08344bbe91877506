package engine_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// A unit's status is set by several sources (dispatch, the engine's own
// terminal), whose epochs and sequences do not compare. Of two sources the
// update applied last wins, unless it is late (older than its source's
// newest), which never overwrites another source's value; of one source's
// updates the newer by (epoch, sequence) wins, as ever. On every store,
// and across a restart.
func TestASetFromAnotherSourceIsJudgedByApplyOrder(t *testing.T) {
	unit := func(agency, src string, seq int, status string) engine.Message {
		return inc(agency, src, 1, seq, `"unit_id":"E7","unit_status":"`+status+`"`)
	}
	status := func(t *testing.T, e *engine.Engine) string {
		t.Helper()
		st := engine.StateJSON(e.State())
		return string(st["unit/E7"]["status"])
	}
	open := func(t *testing.T, s engine.Store) *engine.Engine {
		t.Helper()
		e, err := engine.New(context.Background(), s, engine.Options{Routes: []engine.Route{incidentRoute}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	steps := []struct {
		msg     engine.Message
		outcome engine.Outcome
		want    string
	}{
		{unit("city-dispatch", "cad", 500, "assigned"), engine.Applied, `"assigned"`},
		{unit("county-fire", "engine-7", 3, "released"), engine.Applied, `"released"`},             // another source, applied last: though its sequence is lower
		{unit("city-dispatch", "cad", 498, "enroute"), engine.AppliedLate, `"released"`},           // late: it does not overwrite another source's value
		{unit("county-fire", "engine-7", 2, "staging"), engine.AppliedLate, `"released"`},          // the field's own source, older: it stays
		{unit("city-dispatch", "cad", 501, "available"), engine.Applied, `"available"`},            // dispatch's newest
		{unit("county-fire", "engine-7", 1, "assigned"), engine.AppliedLate, `"available"`},        // late
		{unit("county-fire", "engine-7", 4, "out of service"), engine.Applied, `"out of service"`}, // the engine's newest
	}
	for name, store := range map[string]func(t *testing.T) engine.Store{
		"single-owner": func(t *testing.T) engine.Store { return memory.New() },
		"group": func(t *testing.T) engine.Store {
			m, err := memory.NewGroup(0, 10_000).Open("m1")
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := store(t)
			e := open(t, s)
			for i, st := range steps {
				if i == 4 { // a restart: the field's source is read back from its row
					e.Close()
					e = open(t, s)
				}
				d, err := e.Process(context.Background(), []engine.Message{st.msg})
				if err != nil {
					t.Fatal(err)
				}
				if d[0].Outcome != st.outcome || status(t, e) != st.want {
					t.Fatalf("step %d: %s, status %s; want %s, status %s", i, d[0].Outcome, status(t, e), st.outcome, st.want)
				}
			}
			e.Close()
		})
	}
}
