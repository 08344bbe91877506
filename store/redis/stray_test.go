package redis

import (
	"errors"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestAuditVerifyCatchesRecordsOutsideEveryChain removes a member's chain
// head, or moves it back, or removes the member from the members hash with
// its head, leaving the member's records in the store: audit verify reads
// every chain up to its head, so those records would be read by nothing,
// and the group's chains must not verify as intact.
func TestAuditVerifyCatchesRecordsOutsideEveryChain(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	for _, tc := range []struct {
		name   string
		tamper func(g *group, recs []engine.AuditRecord) [][]string
	}{
		{"a member's head removed", func(g *group, _ []engine.AuditRecord) [][]string {
			return [][]string{{"HDEL", g.prefix + "heads", "m2"}}
		}},
		{"a member's head moved back", func(g *group, recs []engine.AuditRecord) [][]string {
			return [][]string{{"HSET", g.prefix + "heads", "m2", encodeHead(engine.AuditHead{Position: 3, Hash: recs[2].Hash})}}
		}},
		{"a member removed from the members hash with its head", func(g *group, _ []engine.AuditRecord) [][]string {
			return [][]string{{"HDEL", g.prefix + "members", "m2"}, {"HDEL", g.prefix + "heads", "m2"}}
		}},
		{"a member's head and chain index removed", func(g *group, _ []engine.AuditRecord) [][]string {
			return [][]string{{"HDEL", g.prefix + "members", "m2"}, {"HDEL", g.prefix + "heads", "m2"}, {"DEL", g.prefix + "chainindex:m2"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroup(srv)
			m2 := records(t, "m2", engine.AuditHead{}, 6)
			for member, recs := range map[string][]engine.AuditRecord{"m1": records(t, "m1", engine.AuditHead{}, 4), "m2": m2} {
				s := g.must(t, member)
				for _, b := range [][]engine.AuditRecord{recs[:2], recs[2:]} {
					if err := s.Commit(t.Context(), &engine.Batch{Audit: b}); err != nil {
						t.Fatal(err)
					}
				}
			}
			ro := g.must(t, "")
			if _, err := audit.VerifyChains(t.Context(), ro, ro); err != nil {
				t.Fatalf("before the change: %v", err)
			}
			for _, cmd := range tc.tamper(g, m2) {
				g.do(t, cmd...)
			}
			res, err := audit.VerifyChains(t.Context(), ro, ro)
			if !errors.Is(err, audit.ErrBroken) || !strings.Contains(err.Error(), "member m2") {
				t.Fatalf("verify = %+v, %v; want the chain of m2 broken", res, err)
			}
			if _, err := audit.VerifyChainsWithArchive(t.Context(), t.TempDir(), ro, ro); !errors.Is(err, audit.ErrBroken) {
				t.Fatalf("verify with an archive = %v; want the chain of m2 broken", err)
			}
		})
	}
}
