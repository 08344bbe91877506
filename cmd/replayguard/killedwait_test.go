package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAMemberKilledWhileItsSQLEffectWaitsLeavesNoSessionBehind holds a row
// of the user's table in a transaction of the user's own and kills
// (SIGKILL) an ingest whose sql effect waits for that row. The server
// session it leaves must end: an ingest under the same member then takes
// the member over and applies its own message while the user's
// transaction still holds the row, and the killed ingest's message was
// never applied.
func TestAMemberKilledWhileItsSQLEffectWaitsLeavesNoSessionBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts PostgreSQL")
	}
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	bin := buildBinary(t)
	cfg := meterRunConfig(t, pg.URL(), "127.0.0.1:1", `      - sql: "UPDATE totals SET kwh = kwh + $2 WHERE meter = $1"
        args: ["topic[1]", kwh]
`)
	c, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(t.Context(), `CREATE TABLE totals (meter text PRIMARY KEY, kwh numeric NOT NULL);
		INSERT INTO totals VALUES ('m1', 0), ('m2', 0)`); err != nil {
		t.Fatal(err)
	}
	hold, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close(context.Background())
	if _, err := hold.Exec(t.Context(), `BEGIN; SELECT * FROM totals WHERE meter = 'm1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	killed := exec.Command(bin, "ingest", "-c", cfg, "-")
	killed.Stdin = strings.NewReader(`{"topic":"plant/m1/energy","payload":{"msgId":"m1-1","kwh":0.5}}` + "\n")
	var killedErr bytes.Buffer
	killed.Stderr = &killedErr
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killed.Process.Kill(); killed.Wait() })
	waiting := func() int64 {
		var n int64
		if err := c.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'replayguard m1' AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for deadline := time.Now().Add(20 * time.Second); waiting() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the ingest's sql effect never waited for the held row; stderr:\n%s", killedErr.String())
		}
	}
	killed.Process.Signal(syscall.SIGKILL)
	killed.Wait()

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, bin, "ingest", "-c", cfg, "-")
	second.Stdin = strings.NewReader(`{"topic":"plant/m2/energy","payload":{"msgId":"m2-1","kwh":0.25}}` + "\n")
	var out, errb bytes.Buffer
	second.Stdout, second.Stderr = &out, &errb
	err = second.Run()
	if ctx.Err() != nil {
		t.Fatalf("an ingest under the killed ingest's member did not end within 20s, with the user's transaction still open "+
			"(%d sessions of the member wait for a lock); stderr:\n%s", waiting(), errb.String())
	}
	if err != nil || !strings.HasPrefix(out.String(), "applied=1 ") {
		t.Fatalf("the second ingest: %v, stdout %q, stderr:\n%s", err, out.String(), errb.String())
	}
	if n := waiting(); n != 0 {
		t.Fatalf("%d sessions of the member still wait for a lock", n)
	}
	if _, err := hold.Exec(t.Context(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	rows, err := c.Query(t.Context(), `SELECT meter, kwh::text FROM totals ORDER BY meter`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var m, kwh string
		err := r.Scan(&m, &kwh)
		return m + "=" + kwh, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "m1=0 m2=0.25" {
		t.Fatalf("totals %v, want m1=0 (the killed ingest's message not applied) m2=0.25", got)
	}
}
