package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// resumeFeed is message i of a feed whose every third message carries
// besides an incident update of a boot older than the feed's (held).
func resumeFeed(i int) []engine.Message {
	msgs := lossFeed(i)
	msgs[1].Payload = fmt.Appendf(nil, `{"agency":"fd","source_id":"e7","sequence":%d,"boot_id":2,"incident_id":7,"casualty_delta":1}`, i)
	if i%3 == 0 {
		msgs = append(msgs, engine.Message{Topic: "incidents/7", Payload: fmt.Appendf(nil, `{"agency":"fd","source_id":"e7","sequence":%d,"boot_id":1,"incident_id":7,"casualty_delta":1}`, 1000+i)})
	}
	return msgs
}

// TestARecoveryCutShortDecidesNothingTwice: a recovery that committed some
// of the lost batches again and then stopped (the store failed again, or
// the member was killed before the recovery's end was journaled) is
// taken up again without deciding anew what the store holds a decision
// of: each held delivery has one quarantine entry, and each delivery one
// decision on the chain.
func TestARecoveryCutShortDecidesNothingTwice(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cut is what happens to the recovery, which commits batches
		// again until the store fails (cut returns nil when it has).
		cut   func(lg *lossGroup, u *unreachable, older *memory.Checkpoint)
		crash bool
	}{
		{name: "retried while the member runs", cut: func(lg *lossGroup, u *unreachable, _ *memory.Checkpoint) {
			recoverUntilFailure(lg, u, 6)
		}},
		{name: "resumed after the member was killed", crash: true, cut: func(lg *lossGroup, u *unreachable, _ *memory.Checkpoint) {
			recoverUntilFailure(lg, u, 6)
		}},
		{name: "the store failed back into the recovery's batches, which were decided again, then the member was killed", crash: true,
			cut: func(lg *lossGroup, u *unreachable, _ *memory.Checkpoint) {
				recoverUntilFailure(lg, u, 3)
				mid := lg.g.Checkpoint()
				recoverUntilFailure(lg, u, 3)
				lg.g.FailOver(mid)
				recoverUntilFailure(lg, u, 2)
			}},
		{name: "the store failed back before the recovery's start", cut: func(lg *lossGroup, u *unreachable, older *memory.Checkpoint) {
			recoverUntilFailure(lg, u, 4)
			lg.g.FailOver(older)
			recoverUntilFailure(lg, u, 5)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
			u := lg.openUnreachable()
			feed := lg.resumeFeed
			feed(1, 5)
			older := lg.g.Checkpoint()
			feed(6, 10)
			replica := lg.g.Checkpoint()
			feed(11, 30)
			lg.g.FailOver(replica) // lost 11..30, seven of them held
			u.down.Store(true)
			tc.cut(lg, u, older)
			u.down.Store(false)
			if tc.crash {
				lg.close()
				lg.open(true)
			} else if err := lg.e.CheckStore(ctx); err != nil {
				t.Fatal(err)
			}
			feed(31, 33)
			lg.checkDecidedOnce(33)
		})
	}
}

// recoverUntilFailure lets the recovery of lg's member commit n batches
// on u, and has it fail at the next.
func recoverUntilFailure(lg *lossGroup, u *unreachable, n int64) {
	lg.t.Helper()
	u.allow.Store(n)
	if err := lg.e.CheckStore(context.Background()); !errors.Is(err, engine.ErrStoreBehind) {
		lg.t.Fatalf("CheckStore = %v, want the recovery to fail after %d batches", err, n)
	}
}

// resumeFeed has lg's member decide messages from..to of resumeFeed.
func (lg *lossGroup) resumeFeed(from, to int) {
	lg.t.Helper()
	for i := from; i <= to; i++ {
		if _, err := lg.e.Process(context.Background(), resumeFeed(i)); err != nil {
			lg.t.Fatalf("message %d: %v", i, err)
		}
	}
}

// checkDecidedOnce asserts that messages 1..n of resumeFeed were each
// decided once: the state holds them applied once, each held delivery has
// one quarantine entry, each delivery one decision on the chain, and the
// chain verifies.
func (lg *lossGroup) checkDecidedOnce(n int) {
	t := lg.t
	t.Helper()
	ctx := context.Background()
	st, err := lg.e.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kwh, casualties := fmt.Sprintf("%g", 0.25*float64(n)), fmt.Sprint(n)
	for _, s := range st {
		if s.Name == "meter/m1" && s.Fields.Get("kwh").Num != kwh || s.Name == "incident/7" && s.Fields.Get("casualties").Num != casualties {
			t.Fatalf("%s = %v, want %s kWh and %s casualties", s.Name, s.Fields, kwh, casualties)
		}
	}
	held := map[string]int{}
	if err := lg.m.ScanQuarantine(ctx, func(q engine.QuarantineEntry) error { held[string(q.Payload)]++; return nil }); err != nil {
		t.Fatal(err)
	}
	decided := map[string]int{}
	if err := lg.m.ScanChain(ctx, "m1", 1, func(r engine.AuditRecord) error {
		if r.Outcome != engine.OutcomeRecovered && r.Outcome != engine.OutcomeLossAccepted {
			decided[fmt.Sprintf("%s %x", r.Topic, r.Key)]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(held) != n/3 {
		t.Errorf("%d held deliveries, want %d (one in three of %d messages)", len(held), n/3, n)
	}
	for p, k := range held {
		if k != 1 {
			t.Errorf("%d quarantine entries of %s, want 1", k, p)
		}
	}
	for d, k := range decided {
		if k != 1 {
			t.Errorf("%d decisions of %s on the chain, want 1", k, d)
		}
	}
	if _, err := audit.VerifyChains(ctx, lg.m, nil); err != nil {
		t.Fatalf("chains: %v", err)
	}
}
