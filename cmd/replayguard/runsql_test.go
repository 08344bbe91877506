package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestRunRefusesAStatementTheServerWillNotPrepare starts run on a route
// whose sql effect names a table that does not exist yet: run refuses
// at start with lint's words and creates nothing; once the table exists
// it starts.
func TestRunRefusesAStatementTheServerWillNotPrepare(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	broker := l.Addr().String() // no broker listens there: run never gets past it
	l.Close()
	cfg := meterRunConfig(t, pg.URL(), broker, `      - sql: "INSERT INTO later_readings (meter, msg_id, kwh) VALUES ($1, $2, $3)"
        args: ["topic[1]", msgId, kwh]
`)
	c, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	schemaMade := func() bool {
		var n int
		if err := c.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = 'replayguard'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	leased := func() bool {
		if !schemaMade() {
			return false
		}
		var n int
		if err := c.QueryRow(t.Context(), `SELECT count(*) FROM replayguard.members WHERE holder <> ''`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}

	// started runs run until opened says it has opened the store, then
	// stops it, or until it returns; it says which, with run's exit status
	// and its stderr.
	started := func(opened func() bool) (bool, int, string) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var errb bytes.Buffer
		done := make(chan int, 1)
		go func() { done <- run(ctx, []string{"run", "-c", cfg}, strings.NewReader(""), new(bytes.Buffer), &errb) }()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case code := <-done:
				return false, code, errb.String()
			case <-tick.C:
				if opened() {
					cancel()
					code := <-done
					return true, code, errb.String()
				}
			}
		}
	}

	ok, code, errs := started(schemaMade)
	if ok {
		t.Fatalf("run opened the store with a statement the server refuses to prepare; exit %d, stderr:\n%s", code, errs)
	}
	want := cfg + `:8: routes[0].effects[0].sql: the server refuses the statement: relation "later_readings" does not exist (SQLSTATE 42P01)`
	if code != 1 || strings.TrimSpace(errs) != "replayguard run: "+want {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, errs, want)
	}
	if _, lintErrs, _ := cli(t, "", "lint", "-c", cfg); strings.TrimSpace(lintErrs) != "replayguard lint: "+want {
		t.Fatalf("lint says:\n%s\nrun says:\n%s", lintErrs, errs)
	}

	// Created after the refusal, as a user may: the next start runs.
	if _, err := c.Exec(t.Context(), `CREATE TABLE later_readings (meter text, msg_id text, kwh numeric)`); err != nil {
		t.Fatal(err)
	}
	if ok, code, errs := started(leased); !ok || code != 0 {
		t.Fatalf("run with the table created: started %v, exit %d, stderr:\n%s", ok, code, errs)
	}
}

// TestRunStoppedWhileOpeningItsStoreStopsCleanly: a stop (SIGINT,
// SIGTERM) that comes while run opens its store is a stop, exit 0, not a
// failure naming a canceled context; nothing was consumed.
func TestRunStoppedWhileOpeningItsStoreStopsCleanly(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	cfg := meterRunConfig(t, pg.URL(), "127.0.0.1:1", `      - add: {kwh: kwh}
        entity: "meter/{topic[1]}"
`)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var errb bytes.Buffer
	if code := run(ctx, []string{"run", "-c", cfg}, strings.NewReader(""), new(bytes.Buffer), &errb); code != 0 || strings.Contains(errb.String(), "context canceled") {
		t.Fatalf("run stopped while opening its store: exit %d, stderr:\n%s\nwant exit 0, no error", code, errb.String())
	}
}

// meterRunConfig writes the configuration of a run as member m1 of a
// PostgreSQL group at url, consuming from broker (host:port), with one
// meters route whose effects are the YAML list items effects; it returns
// the file's path.
func meterRunConfig(t *testing.T, url, broker, effects string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "replayguard.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `store: {kind: postgres, url: %q, member: m1, journal: {path: %q}}
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects:
%smqtt: {brokers: [tcp://%s], client_id: rg-runsql-1}
http: {listen: "127.0.0.1:0"}
`, url, filepath.Join(dir, "journal"), effects, broker), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}
