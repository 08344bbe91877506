package postgres_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// cellsDDL is the user's two counters and a table of the messages that
// updated them. meet(), which a route calls between a message's two
// updates, returns once another session holds a lock on the counters too,
// or waits for a lock (it will not reach the counters before this
// transaction ends), or after about 100 ms: two members whose messages
// update the counters in opposite orders then each hold the row the other
// updates next, and PostgreSQL aborts one of them with a deadlock.
const cellsDDL = `CREATE TABLE {app}.cells (id int PRIMARY KEY, n bigint NOT NULL);
	INSERT INTO {app}.cells VALUES (1, 0), (2, 0);
	CREATE TABLE {app}.applied (msg_id text NOT NULL, first int NOT NULL);
	CREATE FUNCTION {app}.meet() RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
			FOR i IN 1..100 LOOP
				IF EXISTS (SELECT FROM pg_locks WHERE pid <> pg_backend_pid() AND (NOT granted
						OR relation = '{app}.cells'::regclass AND mode = 'RowExclusiveLock')) THEN
					RETURN;
				END IF;
				PERFORM pg_sleep(0.001);
			END LOOP;
		END $$`

// cellsRoute updates the counter "first" names, meets another member's
// batch (meet), updates the counter "second" names, and records the
// message: four sql effects, two of which touch rows another member's
// messages touch in the opposite order.
func cellsRoute() engine.Route {
	return engine.Route{Name: "cells", Topic: "cells/+", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{
			{SQL: "UPDATE {app}.cells SET n = n + 1 WHERE id = $1", Args: []string{"first"}},
			{SQL: "SELECT {app}.meet()"},
			{SQL: "UPDATE {app}.cells SET n = n + 1 WHERE id = $1", Args: []string{"second"}},
			{SQL: "INSERT INTO {app}.applied (msg_id, first) VALUES ($1, $2)", Args: []string{"msgId", "first"}},
		}}
}

// TestMembersWhoseSQLEffectsDeadlockApplyEveryMessageOnce runs two members
// of a group at once, each deciding its own messages, whose sql effects
// update the user's two counters in opposite orders: PostgreSQL aborts one
// of the two batches with a deadlock (40P01) again and again. Each aborted
// batch is retried by its store and counted among its retries, none
// fails, every message is applied and its effects land once, nothing is
// held as a message's fault, and both audit chains verify.
func TestMembersWhoseSQLEffectsDeadlockApplyEveryMessageOnce(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: []string{"deadlock_timeout=20ms"}})
	g := newGroup(t, pg.URL())
	app := g.schema + "_app"
	sql := func(s string) string { return strings.ReplaceAll(s, "{app}", app) }
	run(t, pg.URL(), "CREATE SCHEMA "+app+"; "+sql(cellsDDL))
	route := cellsRoute()
	for i := range route.Effects {
		route.Effects[i].SQL = sql(route.Effects[i].SQL)
	}
	members := []string{"m1", "m2"}
	stores := make([]*postgres.Store, len(members))
	engines := make([]*engine.Engine, len(members))
	for i, m := range members {
		stores[i] = g.mustOpen(m)
		e, err := engine.New(t.Context(), stores[i], engine.Options{Routes: []engine.Route{route}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		engines[i] = e
	}

	const batches, size = 100, 1
	var wg sync.WaitGroup
	for i, e := range engines {
		first, second := 1+i, 2-i // m1 updates counter 1 first, m2 counter 2
		wg.Go(func() {
			for b := range batches {
				var msgs []engine.Message
				for j := range size {
					msgs = append(msgs, engine.Message{Topic: "cells/" + members[i],
						Payload: fmt.Appendf(nil, `{"msgId":"%s-%d","first":%d,"second":%d}`, members[i], b*size+j, first, second)})
				}
				ds, err := e.Process(t.Context(), msgs)
				if err != nil {
					t.Errorf("member %s, batch %d: Process = %v", members[i], b, err)
					return
				}
				for j, d := range ds {
					if d.Outcome != engine.Applied {
						t.Errorf("member %s, batch %d, message %d: %v %q, want applied", members[i], b, j, d.Outcome, d.Reason)
					}
				}
			}
		})
	}
	wg.Wait()

	const total = 2 * batches * size
	x := &sqlSetup{t: t, url: pg.URL(), app: app}
	if n, ids := x.count(`SELECT count(*) FROM {app}.applied`), x.count(`SELECT count(DISTINCT msg_id) FROM {app}.applied`); n != total || ids != total {
		t.Errorf("%d effects recorded for %d messages, want each of the %d once", n, ids, total)
	}
	for id := 1; id <= 2; id++ {
		if n := x.count(`SELECT n FROM {app}.cells WHERE id = $1`, id); n != total {
			t.Errorf("counter %d is %d, want %d", id, n, total)
		}
	}
	for table, want := range map[string]int64{"keys": total, "quarantine": 0, "audit": total} {
		if n := x.count(`SELECT count(*) FROM ` + g.schema + `.` + table); n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
	var retries uint64
	for i, s := range stores {
		st := s.SharedStats()
		if st.Failures != 0 || st.Updates != batches || st.Rows != batches*size {
			t.Errorf("member %s: stats %+v, want %d updates of %d records and no failure", members[i], st, batches, batches*size)
		}
		retries += st.Retries
	}
	// Each deadlock aborted one batch, which its store retried: the
	// server logs one error a deadlock. Its log reaches the test through
	// a pipe: read it until it has them all (or a deadline passed).
	deadlocks := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		deadlocks = strings.Count(pg.Log(), "ERROR:  deadlock detected")
		if uint64(deadlocks) >= retries || time.Now().After(deadline) {
			break
		}
	}
	if deadlocks < 3 || uint64(deadlocks) != retries {
		t.Errorf("%d deadlocks, %d retries: want at least 3 deadlocks, each retried once", deadlocks, retries)
	}
	t.Logf("%d deadlocks, each batch retried", deadlocks)
	res, err := audit.VerifyChains(t.Context(), stores[0], stores[0])
	if err != nil || len(res) != 2 || res[0].Records != batches*size || res[1].Records != batches*size {
		t.Errorf("audit verify = %+v, %v; want two chains of %d records", res, err, batches*size)
	}
}
