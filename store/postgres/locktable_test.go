package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// smallLockTable are the settings of a server whose lock table holds a
// few hundred locks: max_locks_per_transaction at its minimum.
var smallLockTable = []string{"max_locks_per_transaction=10", "max_connections=20"}

// sequencedMeters adds each reading to its meter's entity; a meter's
// readings are sequenced.
var sequencedMeters = engine.Route{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, Sequence: "seq",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}

// meterReading is reading seq of meter, of 0.25 kWh.
func meterReading(meter, seq int) engine.Message {
	return engine.Message{Topic: fmt.Sprintf("plant/m-%04d/energy", meter), Payload: fmt.Appendf(nil, `{"seq":%d,"kwh":0.25}`, seq)}
}

// TestABatchWhoseNewRowsOutgrowTheLockTableCommitsInParts decides one
// batch from 600 new meters (two readings each, then replays of 50 first
// readings): it claims 1,200 new rows, each holding an advisory lock until
// the batch commits, more than the server's lock table holds. The batch
// commits in smaller parts: every reading applied once, in its meter's
// order (none late), every replay a duplicate, each entity's sum exact,
// and the member says that it split the batch, naming the setting.
func TestABatchWhoseNewRowsOutgrowTheLockTableCommitsInParts(t *testing.T) {
	const meters, replays = 600, 50
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: smallLockTable})
	g := newGroup(t, pg.URL())
	s := g.mustOpen("m1")
	logs := &testbroker.SyncBuffer{}
	e, err := engine.New(t.Context(), s, engine.Options{Routes: []engine.Route{sequencedMeters},
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var msgs []engine.Message
	for seq := 1; seq <= 2; seq++ {
		for m := range meters {
			msgs = append(msgs, meterReading(m, seq))
		}
	}
	for m := range replays {
		msgs = append(msgs, meterReading(m, 1))
	}
	ds, err := e.Process(t.Context(), msgs)
	if err != nil {
		t.Fatalf("Process: %v", err)
	}
	for i, d := range ds {
		want := engine.Applied
		if i >= 2*meters {
			want = engine.Duplicate
		}
		if d.Outcome != want {
			t.Fatalf("message %d (%s): %v %q, want %v", i, msgs[i].Payload, d.Outcome, d.Reason, want)
		}
	}
	snap := loaded(t, s)
	if len(snap.Sources) != meters {
		t.Errorf("%d sources stored, want %d", len(snap.Sources), meters)
	}
	for _, src := range snap.Sources {
		if len(src.Epochs) != 1 || src.Epochs[0].High != 2 {
			t.Errorf("source %s: epochs %+v, want one at sequence 2", src.ID(), src.Epochs)
		}
	}
	kwh := fieldOf(snap, "kwh")
	if len(kwh) != meters {
		t.Errorf("%d entities stored, want %d", len(kwh), meters)
	}
	for name, v := range kwh {
		if v != "0.5" {
			t.Errorf("%s: kwh %s, want 0.5", name, v)
		}
	}
	if n := count(t, pg.URL(), "SELECT count(*) FROM "+g.schema+".audit"); n != int64(len(msgs)) {
		t.Errorf("%d audit records, want %d", n, len(msgs))
	}
	if res, err := audit.VerifyChains(t.Context(), s, s); err != nil || len(res) != 1 || res[0].Records != uint64(len(msgs)) {
		t.Errorf("audit verify = %+v, %v; want one chain of %d records", res, err, len(msgs))
	}
	want := "it was decided in smaller parts"
	log := logs.String()
	if !strings.Contains(log, want) || !strings.Contains(log, "raise max_locks_per_transaction") {
		t.Errorf("log:\n%s\nwant %q, naming max_locks_per_transaction", log, want)
	}
	t.Log(log)
}

// TestADeliveryWhoseRowsTheLockTableCannotHoldNamesTheSetting fills the
// server's lock table from another session: a batch of one reading from a
// new meter cannot commit, and its error says which setting to raise;
// once the table has room, the same reading is applied, once.
func TestADeliveryWhoseRowsTheLockTableCannotHoldNamesTheSetting(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: smallLockTable})
	g := newGroup(t, pg.URL())
	s := g.mustOpen("m1")
	e, err := engine.New(t.Context(), s, engine.Options{Routes: []engine.Route{sequencedMeters}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	filler, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close(context.Background())
	// Session locks stay when the statement that took them fails.
	_, err = filler.Exec(t.Context(), "SELECT count(pg_advisory_lock(7, g)) FROM generate_series(1, 1000000) g")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "53200" {
		t.Fatalf("filling the lock table: %v, want out of shared memory", err)
	}
	msg := []engine.Message{meterReading(1, 1)}
	_, err = e.Process(t.Context(), msg)
	if !errors.Is(err, engine.ErrLockTable) || !strings.Contains(err.Error(), "raise max_locks_per_transaction") {
		t.Fatalf("Process with the lock table full = %v, want %v naming max_locks_per_transaction", err, engine.ErrLockTable)
	}
	t.Logf("with the lock table full: %v", err)
	// Released when it returns, unlike on a close, after which the
	// server's backend ends in its own time.
	if _, err := filler.Exec(t.Context(), "SELECT pg_advisory_unlock_all()"); err != nil {
		t.Fatal(err)
	}
	ds, err := e.Process(t.Context(), msg)
	if err != nil || ds[0].Outcome != engine.Applied {
		t.Fatalf("Process with room = %+v, %v; want applied", ds, err)
	}
	if n := count(t, pg.URL(), "SELECT count(*) FROM "+g.schema+".audit"); n != 1 {
		t.Errorf("%d audit records, want 1", n)
	}
}
