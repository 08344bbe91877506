package failover

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// The sql effects setupOptions.SQL adds: every applied message of either
// route inserts one row, with its idempotency key, into a table of the
// user's own (sqlTables). Neither table constrains a message's identity,
// so a message applied twice shows as two rows. meter_rows has a unique
// constraint of its own, on serial, which the meters leave NULL and which
// one row already holds: a message carrying that serial violates it.
const (
	feedSQLEffect = `      - sql: "INSERT INTO feed_rows (source_id, boot_id, sequence, key) VALUES ($1, $2, $3, $4)"
        args: [source_id, boot_id, sequence, "@key"]
`
	meterSQLEffect = `      - sql: "INSERT INTO meter_rows (meter, msg_id, key, serial) VALUES ($1, $2, $3, $4)"
        args: ["topic[1]", msgId, "@key", serial]
`
	sqlTables = `CREATE TABLE feed_rows (source_id text NOT NULL, boot_id text NOT NULL, sequence bigint NOT NULL, key text NOT NULL);
		CREATE TABLE meter_rows (meter text NOT NULL, msg_id text NOT NULL, key text NOT NULL, serial text UNIQUE);
		INSERT INTO meter_rows VALUES ('m0', 'seed', 'seed', 'taken')`
	// refusedMeter's messages carry serial "taken": each one violates
	// meter_rows_serial_key.
	refusedMeter = "m0"
	// refusedReason begins the reason of each of their decisions: the
	// meters route's effects[1] is its sql effect.
	refusedReason = `sql effects[1]: SQLSTATE 23505: duplicate key value violates unique constraint "meter_rows_serial_key"`
)

// sqlRun is the sql part of a group run on PostgreSQL: the user's tables
// on the store's server and a publisher of messages that violate their
// constraint.
type sqlRun struct {
	url string
	pub *testbroker.Publisher
}

// startSQL creates the user's tables on the server at url and connects a
// publisher of refusedMeter's messages to brokers.
func startSQL(t testing.TB, url string, brokers []string) *sqlRun {
	t.Helper()
	c := sqlConn(t, url)
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(), sqlTables); err != nil {
		t.Fatal(err)
	}
	return &sqlRun{url: url, pub: testbroker.NewPublisher(t, brokers, testbroker.PublisherOptions{
		Topic: meterTopic,
		Payload: func(meter string, n int64) []byte {
			return fmt.Appendf(nil, `{"msgId":%q,"value":1,"serial":"taken"}`, meterID(meter, n))
		},
	})}
}

func sqlConn(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// PublishRefusedAmong publishes one message that violates the user's
// constraint between the first messages of meters, half of them before it
// and half after, through meters' publisher; the broker must acknowledge
// each.
func (s *sqlRun) PublishRefusedAmong(t testing.TB, pub *testbroker.Publisher, meters []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lone := func(meters []string) {
		for _, m := range meters {
			if pub.Publish(ctx, m, 1) != 1 {
				t.Fatalf("the broker did not acknowledge meter %s's message", m)
			}
		}
	}
	lone(meters[:len(meters)/2])
	if s.pub.Publish(ctx, refusedMeter, 1) != 1 {
		t.Fatal("the broker did not acknowledge the message that violates the user's constraint")
	}
	lone(meters[len(meters)/2:])
}

// check checks the user's tables and the refused message against the
// run's audit: each applied message of either route is exactly one row,
// with its key, and no row belongs to a message not applied; the refused
// message was quarantined naming SQLSTATE 23505, under one entry for each
// decision that held it, holding its raw bytes, and delivered again it
// is a duplicate of such an entry (a second entry would be one more
// release that could apply it); and it was held in a transaction with
// applied messages, which committed.
func (s *sqlRun) check(t testing.TB, r *result, quarantine []engine.QuarantineEntry) {
	t.Helper()
	applied := map[string]string{} // route/source#seq → key
	for _, rec := range r.Records {
		if rec.Outcome != engine.Applied.String() && rec.Outcome != engine.AppliedLate.String() {
			continue
		}
		if k, _, err := r.identify(rec); err == nil {
			applied[rec.Route+"/"+k.String()] = rec.Key.String()
		}
	}
	rows := s.rows(t)
	for id, keys := range rows {
		if want, ok := applied[id]; !ok || len(keys) != 1 || keys[0] != want {
			t.Errorf("user table rows of %s: keys %v; the audit has it applied: %v (key %s)", id, keys, ok, want)
		}
	}
	for id := range applied {
		if rows[id] == nil {
			t.Errorf("%s applied, and no row of it in the user's table", id)
		}
	}
	t.Logf("user tables: %d rows, one for each of %d messages applied", len(rows), len(applied))

	if len(r.SetAside) == 0 {
		t.Fatal("the message violating the user's constraint was never decided")
	}
	var held []engine.QuarantineEntry
	for _, q := range quarantine {
		if q.Topic == meterTopic(refusedMeter) {
			held = append(held, q)
		}
	}
	want := fmt.Appendf(nil, `{"msgId":%q,"value":1,"serial":"taken"}`, meterID(refusedMeter, 1))
	for _, q := range held {
		if !strings.HasPrefix(q.Reason, refusedReason) || !bytes.Equal(q.Payload, want) {
			t.Errorf("quarantine entry %d: reason %q, payload %q", q.ID, q.Reason, q.Payload)
		}
	}
	inBatch, quarantined, again := 0, 0, 0
	for _, rec := range r.SetAside {
		if heldAgain(rec) {
			again++
			if !slices.ContainsFunc(held, func(q engine.QuarantineEntry) bool {
				return strings.HasPrefix(rec.Reason, fmt.Sprintf("delivered again: held in quarantine as #%d,", q.ID))
			}) {
				t.Errorf("the message violating the user's constraint delivered again: %q names no entry that holds it (member %s, position %d)", rec.Reason, rec.Member, rec.Position)
			}
			continue
		}
		quarantined++
		if rec.Outcome != engine.Quarantined.String() || !strings.HasPrefix(rec.Reason, refusedReason) {
			t.Errorf("the message violating the user's constraint: %s %q (member %s, position %d)", rec.Outcome, rec.Reason, rec.Member, rec.Position)
		}
		// Its transaction: the member's records decided at the same
		// instant. Each part of a batch, and each try of it, is timed
		// when its rows are read: a part that commits after another is
		// timed after it.
		for _, o := range r.Records {
			if o.Member == rec.Member && o.Time.Equal(rec.Time) && (o.Outcome == engine.Applied.String() || o.Outcome == engine.AppliedLate.String()) {
				inBatch++
			}
		}
	}
	if len(held) != quarantined {
		t.Errorf("%d quarantine entries of the message violating the user's constraint, %d decisions that held it", len(held), quarantined)
	}
	if inBatch == 0 {
		t.Error("the message violating the user's constraint was alone in its transaction: the rest of a batch committing was not exercised")
	}
	t.Logf("the message violating the user's constraint: held %d times (%s…), beside %d messages applied in the same transactions; delivered again %d times, a duplicate of its entry",
		quarantined, refusedReason, inBatch, again)
}

// rows reads the user's tables: the keys in each applied message's rows,
// by route/source#seq as result.identify names them.
func (s *sqlRun) rows(t testing.TB) map[string][]string {
	t.Helper()
	c := sqlConn(t, s.url)
	defer c.Close(context.Background())
	out := map[string][]string{}
	for _, q := range []struct{ route, sql string }{
		{routeName, `SELECT source_id, sequence, key FROM feed_rows`},
		{idRouteName, `SELECT meter, split_part(msg_id, '-', 2)::bigint, key FROM meter_rows WHERE msg_id <> 'seed'`},
	} {
		rs, err := c.Query(context.Background(), q.sql)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var k seqKey
			var key string
			if err := rs.Scan(&k.source, &k.seq, &key); err != nil {
				t.Fatal(err)
			}
			id := q.route + "/" + k.String()
			out[id] = append(out[id], key)
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
