package engine_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/store/memory"
)

// TestARecoveryCutShortByAFailoverToAStandbyAheadOfItDecidesNothingTwice:
// the recovery began on a standby promoted at message 10 and committed a
// few lost batches there; that store failed and another standby, which had
// received everything up to message 20 from the old primary, was promoted.
// It holds messages 11..20 as first decided: only 21..30 are lost.
func TestARecoveryCutShortByAFailoverToAStandbyAheadOfItDecidesNothingTwice(t *testing.T) {
	ctx := context.Background()
	lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
	u := lg.openUnreachable()
	feed := lg.resumeFeed
	feed(1, 10)
	a := lg.g.Checkpoint()
	feed(11, 20)
	b := lg.g.Checkpoint()
	feed(21, 30)
	lg.g.FailOver(a)
	u.down.Store(true)
	recoverUntilFailure(lg, u, 4)
	lg.g.FailOver(b)
	u.down.Store(false)
	if err := lg.e.CheckStore(ctx); err != nil {
		t.Fatal(err)
	}
	feed(31, 33)
	lg.checkDecidedOnce(33)
}
