package redis

import (
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// A record line whose position is not after the lines read before it (a
// copy of an earlier record, altered, added to its own batch or to a later
// one) was passed over by every reader of the chain: audit verify called
// the chain intact while the store held a record no chain reads. It is an
// error naming the member, the position and the batch, for verify and
// every other reader alike.
func TestARecordOutOfItsPlaceInTheChainIsNotPassedOver(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	for _, batch := range []string{"1", "5"} {
		t.Run("a copy of position 2 added to the batch from "+batch, func(t *testing.T) {
			g := newGroup(srv)
			s := g.must(t, "m1")
			recs := records(t, "m1", engine.AuditHead{}, 6)
			for _, b := range [][]engine.AuditRecord{recs[:4], recs[4:]} {
				if err := s.Commit(t.Context(), &engine.Batch{Audit: b}); err != nil {
					t.Fatal(err)
				}
			}
			ro := g.must(t, "")
			if _, err := audit.VerifyChains(t.Context(), ro, ro); err != nil {
				t.Fatalf("before the change: %v", err)
			}
			first, ok := g.do(t, "HGET", g.prefix+"chain:m1", "1").(string)
			if !ok {
				t.Fatal("the batch from position 1 is not a string")
			}
			second := strings.Split(first, "\n")[1] // position 2
			forged := strings.Replace(second, `"outcome":"`, `"outcome":"forged-`, 1)
			if forged == second {
				t.Fatalf("no outcome in %s", second)
			}
			blob := g.do(t, "HGET", g.prefix+"chain:m1", batch).(string)
			g.do(t, "HSET", g.prefix+"chain:m1", batch, blob+"\n"+forged)

			res, err := audit.VerifyChains(t.Context(), ro, ro)
			if err == nil || !strings.Contains(err.Error(), `audit chain of "m1" holds a record at position 2 out of its place, in the batch of positions `+batch+` on`) {
				t.Fatalf("verify = %+v, %v; want an error naming m1's record at position 2", res, err)
			}
			if _, err := audit.VerifyChainsWithArchive(t.Context(), t.TempDir(), ro, ro); err == nil || !strings.Contains(err.Error(), "position 2 out of its place") {
				t.Fatalf("verify with an archive = %v; want an error naming position 2", err)
			}
			var from3 []uint64
			err = ro.ScanChain(t.Context(), "m1", 3, func(r engine.AuditRecord) error { from3 = append(from3, r.Position); return nil })
			if err == nil || len(from3) == 0 || from3[0] != 3 {
				t.Fatalf("a scan from position 3 read %v, %v; want it from 3 on, then the error", from3, err)
			}
		})
	}
}
