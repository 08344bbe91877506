package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// countDecisions returns how many quarantine entries each held payload
// has, and how many decisions each delivery has on m1's chain.
func countDecisions(t *testing.T, lg *lossGroup) (held, decided map[string]int) {
	t.Helper()
	ctx := context.Background()
	held, decided = map[string]int{}, map[string]int{}
	if err := lg.m.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error { held[string(q.Payload)]++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := lg.m.ScanChain(ctx, "m1", 1, func(r engine.AuditRecord) error {
		if r.Outcome != engine.OutcomeRecovered && r.Outcome != engine.OutcomeLossAccepted {
			decided[fmt.Sprintf("%s %x", r.Topic, r.Key)]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return held, decided
}

// TestARecoveryCutShortByAFailoverToAStandbyAheadOfItDecidesNothingTwice:
// the recovery began on a standby promoted at message 10 and committed a
// few lost batches there; that store failed and another standby, which had
// received everything up to message 20 from the old primary, was promoted.
// It holds messages 11..20 as first decided: only 21..30 are lost.
func TestARecoveryCutShortByAFailoverToAStandbyAheadOfItDecidesNothingTwice(t *testing.T) {
	ctx := context.Background()
	lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
	u := lg.openUnreachable()
	feed := func(from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			if _, err := lg.e.Process(ctx, resumeFeed(i)); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
	}
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
	held, decided := countDecisions(t, lg)
	if len(held) != 11 {
		t.Errorf("%d held deliveries, want 11", len(held))
	}
	for p, n := range held {
		if n != 1 {
			t.Errorf("%d quarantine entries of %s, want 1", n, p)
		}
	}
	twice := 0
	for _, n := range decided {
		if n != 1 {
			twice++
		}
	}
	if twice > 0 {
		t.Errorf("%d deliveries have more than one decision on the chain", twice)
	}
}
