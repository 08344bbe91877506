package postgres_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestConnectionsCarryTheMemberID opens a member's store and a read-only
// one, and one whose URL names its own application_name: pg_stat_activity
// shows which connection is whose.
func TestConnectionsCarryTheMemberID(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	ctx := context.Background()
	names := func() map[string]int {
		conn, err := pgx.Connect(ctx, pg.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, "SELECT application_name FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out[n]++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var logs [3]bytes.Buffer
	for i, o := range []postgres.Options{{URL: pg.URL(), Member: "rg-7"}, {URL: pg.URL()}, {URL: pg.URL() + "&application_name=ops-cop", Member: "rg-8"}} {
		o.Logger = slog.New(slog.NewTextHandler(&logs[i], nil))
		s, err := postgres.Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	// The member whose URL names its sessions is told that no other
	// member ends them when a dead host leaves them in a transaction.
	for i, warned := range []bool{false, false, true} {
		if got := strings.Contains(logs[i].String(), "no other member ends them"); got != warned {
			t.Errorf("store %d warned of its sessions' name: %v, want %v; it logged:\n%s", i, got, warned, logs[i].String())
		}
	}
	if !strings.Contains(logs[2].String(), "application_name=ops-cop") {
		t.Errorf("the warning does not name the sessions' name: %s", logs[2].String())
	}
	got := names()
	for _, want := range []string{"replayguard rg-7", "replayguard", "ops-cop"} {
		if got[want] == 0 {
			t.Fatalf("no connection named %q among %v", want, got)
		}
	}
	if len(got) != 3 {
		t.Fatalf("connections named %v, want only the three stores' names", got)
	}
}
