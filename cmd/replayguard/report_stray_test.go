package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestReportOfAGroupHoldingRecordsOutsideEveryChainIsBroken: a shared
// store that holds records of a chain it no longer lists (on PostgreSQL
// the member's row removed, which names the chain by its number; on Redis
// its chain head) fails audit verify,
// and the after-action report must say the same: the chain broken, never
// a report of the other chains called intact.
func TestReportOfAGroupHoldingRecordsOutsideEveryChainIsBroken(t *testing.T) {
	for _, kind := range []struct {
		name, chain string
		start       func(t *testing.T) (store string, tamper func())
	}{
		{"on PostgreSQL", "#2", func(t *testing.T) (string, func()) {
			pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
			return fmt.Sprintf("{kind: postgres, url: %q, schema: stray", pg.URL()), func() {
				c, err := pgx.Connect(t.Context(), pg.URL())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(t.Context())
				if _, err := c.Exec(t.Context(), `DELETE FROM stray.members WHERE member = 'm2'`); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"on Redis", "m2", func(t *testing.T) (string, func()) {
			r := testbroker.StartRedis(t, testbroker.RedisOptions{})
			return fmt.Sprintf(`{kind: redis, url: %q, prefix: "{stray}:"`, r.URL()), func() {
				if _, err := r.Do("HDEL", "{stray}:heads", "m2"); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			store, tamper := kind.start(t)
			cfg := map[string]string{}
			for i, m := range []string{"m1", "m2"} {
				cfg[m] = storeConfig(t, store+", member: "+m+"}")
				mustRun(t, "", "ingest", "-c", cfg[m], meterFeed(t, 100*i, 30))
			}
			tamper()
			if _, errs, code := cli(t, "", "audit", "verify", "-c", cfg["m1"]); code != 1 || !strings.Contains(errs, "member "+kind.chain) {
				t.Fatalf("audit verify: exit %d %s", code, errs)
			}
			var rep struct {
				Verification struct {
					Intact bool
					Chains []struct{ Member, Broken string }
				}
			}
			if err := json.Unmarshal([]byte(mustRun(t, "", "report", "--format", "json", "-c", cfg["m1"])), &rep); err != nil {
				t.Fatal(err)
			}
			v := rep.Verification
			broken := ""
			for _, c := range v.Chains {
				if c.Member == kind.chain {
					broken = c.Broken
				}
			}
			if v.Intact || !strings.Contains(broken, "past the chain head it keeps") {
				t.Fatalf("the report's verification = %+v; want the chain of %s broken", v, kind.chain)
			}
			if !strings.Contains(mustRun(t, "", "report", "-c", cfg["m1"]), `id="verdict">BROKEN<`) {
				t.Error("the HTML report does not say the chain is broken")
			}
		})
	}
}
