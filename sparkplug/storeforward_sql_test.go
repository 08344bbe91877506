package sparkplug_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/sparkplug"
	"github.com/replayguard/replayguard/store/postgres"
)

// An edge reconnecting after an outage forwards the readings it stored,
// several values of one metric in one NDATA. A sql effect inserting a
// meter's readings into the user's own table must insert each of them,
// once, in the payload's order, as an add counts each.

// sqlMeter is a member's engine on a real PostgreSQL whose sparkplug route
// runs stmt ("{app}" is the user's schema) with args, and adds Energy up.
type sqlMeter struct {
	*harness
	url, app string
}

func newSQLMeter(t *testing.T, pg *testbroker.Postgres, stmt string, args ...string) *sqlMeter {
	t.Helper()
	schema := fmt.Sprintf("sp%d", groups.Add(1))
	x := &sqlMeter{url: pg.URL(), app: schema + "_app"}
	x.exec(t, "CREATE SCHEMA {app}; CREATE TABLE {app}.readings (n serial PRIMARY KEY, meter text NOT NULL, "+
		"at bigint, kwh numeric CHECK (kwh >= 0), power numeric, historical boolean)")
	s, err := postgres.Open(t.Context(), postgres.Options{URL: pg.URL(), Member: "m1", Schema: schema, TTL: keyTTL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	route := engine.Route{Name: "plant", Kind: sparkplug.KindSparkplug, Topic: "spBv1.0/#", Effects: []engine.EffectSpec{
		{SQL: strings.ReplaceAll(stmt, "{app}", x.app), Args: args},
		{Entity: "meter/{topic[3]}", Add: map[string]string{"kwh": "metrics.Energy"}},
	}}
	x.harness = newHarnessWith(t, s, func(o *engine.Options) { o.Routes = []engine.Route{route} })
	return x
}

func (x *sqlMeter) exec(t *testing.T, sql string) {
	t.Helper()
	c, err := pgx.Connect(t.Context(), x.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(t.Context(), strings.ReplaceAll(sql, "{app}", x.app)); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// rows are the user's table's rows in the order inserted, each as
// "meter kwh power at historical", "-" for NULL.
func (x *sqlMeter) rows(t *testing.T) []string {
	t.Helper()
	c, err := pgx.Connect(t.Context(), x.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rs, err := c.Query(t.Context(), "SELECT concat_ws(' ', meter, coalesce(kwh::text, '-'), coalesce(power::text, '-'), "+
		"coalesce(at::text, '-'), coalesce(historical::text, '-')) FROM "+x.app+".readings ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func power(v float64) sparkplug.Metric {
	return sparkplug.Metric{Name: "Power", Datatype: sparkplug.Double, Value: v}
}

const insertEnergy = "INSERT INTO {app}.readings (meter, kwh) VALUES ($1, $2)"

// TestAStatementRunsOnceForEachStoredValueOfItsMetric: an NDATA carrying
// three stored Energy readings and the current one inserts four rows, in
// its order, in the decision's transaction; its replay inserts none, and
// the audit record says how many times the statement ran. A payload with
// one value runs it once, as ever.
func TestAStatementRunsOnceForEachStoredValueOfItsMetric(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	x := newSQLMeter(t, pg, insertEnergy, "topic[3]", "metrics.Energy")
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	x.expect(engine.Applied, edge.Birth(c.next(), storeAndForwardMetrics))
	m := historical(t, edge.Data(c.next(), []sparkplug.Metric{energy(0.25), energy(0.125), energy(0.5), energy(1)}), 0, 1, 2)
	d := x.expect(engine.Applied, m)
	x.expect(engine.Duplicate, m)
	x.expect(engine.Applied, edge.Data(c.next(), []sparkplug.Metric{energy(2)}))
	want := []string{"m1 0 - - -", "m1 0.25 - - -", "m1 0.125 - - -", "m1 0.5 - - -", "m1 1 - - -", "m1 2 - - -"}
	if got := x.rows(t); !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q: the birth's 0, the NDATA's 0.25, 0.125 and 0.5 stored during the outage and 1 now, then 2", got, want)
	}
	if got := x.field("meter/m1", "kwh"); got != "3.875" {
		t.Fatalf("kwh %s, want 3.875", got)
	}
	note := "sql effects[0] ran 4 times, once for each value of metrics.Energy"
	if d[0].Reason != note || x.record(d[0]).Reason != note {
		t.Fatalf("reason %q, audit reason %q, want %q", d[0].Reason, x.record(d[0]).Reason, note)
	}
}

// TestAStoredValueTheTableRefusesHoldsTheWholeMessage: a value the user's
// table refuses (a check) holds its message, with the run it broke named,
// and none of its rows stay: a message's runs commit together or not at
// all.
func TestAStoredValueTheTableRefusesHoldsTheWholeMessage(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	x := newSQLMeter(t, pg, insertEnergy, "topic[3]", "metrics.Energy")
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	x.expect(engine.Applied, edge.Birth(c.next(), storeAndForwardMetrics))
	d := x.expect(engine.Quarantined, historical(t, edge.Data(c.next(), []sparkplug.Metric{energy(0.25), energy(-1), energy(1)}), 0, 1))
	want := `sql effects[0] (run 2 of 3): SQLSTATE 23514: new row for relation "readings" violates check constraint "readings_kwh_check"`
	if !strings.HasPrefix(d[0].Reason, want) {
		t.Fatalf("reason %q, want it to begin %q", d[0].Reason, want)
	}
	if got := x.rows(t); !slices.Equal(got, []string{"m1 0 - - -"}) {
		t.Fatalf("rows %q, want the birth's alone", got)
	}
	if got := x.field("meter/m1", "kwh"); got != "0" {
		t.Fatalf("kwh %s, want the birth's 0", got)
	}
}

// TestAStatementTakesTwoMetricsStoredTogetherValueByValue: a statement
// reading two metrics that a payload carries as many times each runs once
// for each pair, in order; carried a different number of times, which
// values go together cannot be told, and the message is held, never run
// with a guess.
func TestAStatementTakesTwoMetricsStoredTogetherValueByValue(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	x := newSQLMeter(t, pg, "INSERT INTO {app}.readings (meter, kwh, power) VALUES ($1, $2, $3)", "topic[3]", "metrics.Energy", "metrics.Power")
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	x.expect(engine.Applied, edge.Birth(c.next(), storeAndForwardMetrics))
	d := x.expect(engine.Applied, historical(t, edge.Data(c.next(), []sparkplug.Metric{energy(0.25), power(3), energy(0.5), power(4)}), 0, 1))
	want := []string{"m1 0 - - -", "m1 0.25 3 - -", "m1 0.5 4 - -"}
	if got := x.rows(t); !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	if note := "sql effects[0] ran 2 times, once for each value of metrics.Energy and metrics.Power"; d[0].Reason != note {
		t.Fatalf("reason %q, want %q", d[0].Reason, note)
	}
	d = x.expect(engine.Malformed, edge.Data(c.next(), []sparkplug.Metric{energy(0.25), power(3), energy(0.5), power(4), power(5)}))
	why := "sql effects[0]: metrics.Energy carries 2 values and metrics.Power 3: which of them one run of the statement takes together cannot be told"
	if d[0].Reason != why {
		t.Fatalf("reason %q, want %q", d[0].Reason, why)
	}
	if got := x.rows(t); !slices.Equal(got, want) {
		t.Fatalf("rows %q after the held message, want %q", got, want)
	}
}

// TestEachStoredValueIsInsertedWithItsOwnTimestampAndFlag: a run for one
// of a metric's several values reads that value's own timestamp
// (timestamp.<Name>) and is_historical flag (is_historical.<Name>), so the
// user's table tells when each reading was taken and which were stored. A
// metric without a timestamp of its own gives NULL.
func TestEachStoredValueIsInsertedWithItsOwnTimestampAndFlag(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	x := newSQLMeter(t, pg, "INSERT INTO {app}.readings (meter, at, kwh, historical) VALUES ($1, $2, $3, $4)",
		"topic[3]", "timestamp.Energy", "metrics.Energy", "is_historical.Energy")
	c := newClock()
	edge := sparkplug.NewEdge("plant", "m1", 0)
	x.expect(engine.Applied, edge.Birth(c.next(), storeAndForwardMetrics))
	m := historical(t, edge.Data(c.next(), []sparkplug.Metric{energy(0.25), energy(0.125), temperature(21), energy(1)}), 0, 1)
	d := x.expect(engine.Applied, stampMetrics(t, m, 1764590400000, 1764590460000, 1764590460000, 1764590520000))
	x.expect(engine.Applied, edge.Data(c.next(), []sparkplug.Metric{energy(2)}))
	want := []string{"m1 0 - - false", "m1 0.25 - 1764590400000 true", "m1 0.125 - 1764590460000 true", "m1 1 - 1764590520000 false", "m1 2 - - false"}
	if got := x.rows(t); !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	note := "sql effects[0] ran 3 times, once for each value of timestamp.Energy, metrics.Energy and is_historical.Energy"
	if d[0].Reason != note {
		t.Fatalf("reason %q, want %q", d[0].Reason, note)
	}
}
