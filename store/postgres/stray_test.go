package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAuditVerifyCatchesRecordsOutsideEveryChain resets a member's chain
// head, or removes the member's row, leaving its records in the store:
// audit verify reads every chain up to its head, so those records would be
// read by nothing, and the group's chains must not verify as intact.
func TestAuditVerifyCatchesRecordsOutsideEveryChain(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	for _, tc := range []struct{ name, tamper, want string }{
		{"a member's head reset to zero", `UPDATE {s}.members SET head_position = 0 WHERE member = 'm2'`, "member m2"},
		{"a member's head moved back", `UPDATE {s}.members SET head_position = 3, head_hash = $1 WHERE member = 'm2'`, "member m2"},
		{"a member's row removed", `DELETE FROM {s}.members WHERE member = 'm2'`, "past the chain head"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroup(t, pg.URL())
			m2 := records("m2", 1, 6)
			for member, recs := range map[string][]engine.AuditRecord{"m1": records("m1", 1, 4), "m2": m2} {
				if err := g.mustOpen(member).Commit(t.Context(), &engine.Batch{Audit: recs}); err != nil {
					t.Fatal(err)
				}
			}
			ro := g.mustOpen("")
			if _, err := audit.VerifyChains(t.Context(), ro, ro); err != nil {
				t.Fatalf("before the change: %v", err)
			}
			c, err := pgx.Connect(t.Context(), pg.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(t.Context())
			sql := strings.ReplaceAll(tc.tamper, "{s}", pgx.Identifier{g.schema}.Sanitize())
			var args []any
			if strings.Contains(sql, "$1") {
				args = append(args, m2[2].Hash[:])
			}
			if _, err := c.Exec(t.Context(), sql, args...); err != nil {
				t.Fatal(err)
			}
			res, err := audit.VerifyChains(t.Context(), ro, ro)
			if !errors.Is(err, audit.ErrBroken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("verify = %+v, %v; want the chain of m2 broken", res, err)
			}
			if _, err := audit.VerifyChainsWithArchive(t.Context(), t.TempDir(), ro, ro); !errors.Is(err, audit.ErrBroken) {
				t.Fatalf("verify with an archive = %v; want the chain of m2 broken", err)
			}
		})
	}
}
