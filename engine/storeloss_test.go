package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
	"github.com/replayguard/replayguard/store/memory"
)

// lossFeed is a meter reading (id route) and an incident update (sequenced)
// per message number.
func lossFeed(i int) []engine.Message {
	return []engine.Message{
		{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":0.25}`, i)},
		{Topic: "incidents/7", Payload: fmt.Appendf(nil, `{"agency":"fd","source_id":"e7","sequence":%d,"boot_id":1,"incident_id":7,"casualty_delta":1}`, i)},
	}
}

type lossGroup struct {
	t  *testing.T
	g  *memory.Group
	m  *memory.Member
	j  *journal.Journal
	e  *engine.Engine
	jd string
}

func newLossGroup(t *testing.T, withJournal bool) *lossGroup {
	t.Helper()
	lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
	lg.open(withJournal)
	return lg
}

func (lg *lossGroup) open(withJournal bool) {
	lg.t.Helper()
	var err error
	if lg.m, err = lg.g.Open("m1"); err != nil {
		lg.t.Fatal(err)
	}
	opts := engine.Options{Routes: []engine.Route{incidentRoute, meterRoute}, StoreName: "memory"}
	if withJournal {
		if lg.j, err = journal.Open(lg.jd, journal.Options{}); err != nil {
			lg.t.Fatal(err)
		}
		opts.Journal = lg.j
	}
	if lg.e, err = engine.New(context.Background(), lg.m, opts); err != nil {
		lg.t.Fatal(err)
	}
	lg.t.Cleanup(lg.close)
}

func (lg *lossGroup) close() {
	lg.e.Close()
	lg.m.Close()
	if lg.j != nil {
		lg.j.Close()
	}
}

func (lg *lossGroup) feed(from, to int) error {
	for i := from; i <= to; i++ {
		if _, err := lg.e.Process(context.Background(), lossFeed(i)); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return nil
}

// check asserts the group's state is exactly messages 1..n applied once
// and every chain verifies.
func (lg *lossGroup) check(n int) {
	lg.t.Helper()
	ctx := context.Background()
	st, err := lg.e.ReadState(ctx)
	if err != nil {
		lg.t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range st {
		for _, v := range s.Fields {
			got[s.Name+"."+v.Name] = v.Num
		}
	}
	kwh := fmt.Sprintf("%g", 0.25*float64(n))
	if got["meter/m1.kwh"] != kwh || got["incident/7.casualties"] != fmt.Sprint(n) {
		lg.t.Fatalf("state %v: want %s kWh and %d casualties", got, kwh, n)
	}
	if _, err := audit.VerifyChains(ctx, lg.m, nil); err != nil {
		lg.t.Fatalf("chains: %v", err)
	}
}

func TestAStoreThatFailsOverWithoutTheLastCommitsIsGivenThemBackFromTheJournal(t *testing.T) {
	lg := newLossGroup(t, true)
	if err := lg.feed(1, 20); err != nil {
		t.Fatal(err)
	}
	replica := lg.g.Checkpoint() // the replica stops receiving here
	if err := lg.feed(21, 50); err != nil {
		t.Fatal(err)
	}
	lg.g.FailOver(replica)

	// The next batch finds the store behind: it fails, nothing of it is
	// acknowledged, and the one after it recovers first.
	err := lg.feed(51, 51)
	if err == nil {
		t.Fatal("the first batch after the failover committed on a store that had lost 60 records")
	}
	if err := lg.feed(51, 60); err != nil {
		t.Fatal(err)
	}
	lg.check(60)
	if s := lg.e.LossStats(); s.Detected != 1 || s.Recovered != 60 || lg.e.Loss() != nil {
		t.Fatalf("loss stats %+v, loss %v: want 1 detected, 60 deliveries recovered, none left", s, lg.e.Loss())
	}
	var recovered []engine.AuditRecord
	if err := lg.m.ScanChain(context.Background(), "m1", 1, func(r engine.AuditRecord) error {
		if r.Outcome == engine.OutcomeRecovered {
			recovered = append(recovered, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(recovered) != 1 || recovered[0].Reason == "" {
		t.Fatalf("recovery records %+v: want one naming the range", recovered)
	}
	t.Log(recovered[0].Reason)
}

func TestAnIdleMemberFindsTheLossWhenItChecksTheStore(t *testing.T) {
	lg := newLossGroup(t, true)
	if err := lg.feed(1, 5); err != nil {
		t.Fatal(err)
	}
	replica := lg.g.Checkpoint()
	if err := lg.feed(6, 9); err != nil {
		t.Fatal(err)
	}
	lg.g.FailOver(replica)
	if err := lg.e.CheckStore(context.Background()); err != nil {
		t.Fatal(err)
	}
	lg.check(9)
	if err := lg.e.CheckStore(context.Background()); err != nil {
		t.Fatalf("a second check after the recovery: %v", err)
	}
}

func TestAMemberRestartedAfterTheFailoverRecoversFromItsJournalAtStart(t *testing.T) {
	lg := newLossGroup(t, true)
	if err := lg.feed(1, 10); err != nil {
		t.Fatal(err)
	}
	replica := lg.g.Checkpoint()
	if err := lg.feed(11, 30); err != nil {
		t.Fatal(err)
	}
	lg.close() // killed with the store
	lg.g.FailOver(replica)
	lg.open(true)
	if l := lg.e.Loss(); l != nil {
		t.Fatalf("after start: %v", l)
	}
	lg.check(30)
	if err := lg.feed(31, 35); err != nil {
		t.Fatal(err)
	}
	lg.check(35)
}

func TestALossNoJournalHoldsStopsTheMemberUntilAnOperatorAcceptsIt(t *testing.T) {
	lg := newLossGroup(t, false)
	if err := lg.feed(1, 10); err != nil {
		t.Fatal(err)
	}
	replica := lg.g.Checkpoint()
	if err := lg.feed(11, 12); err != nil {
		t.Fatal(err)
	}
	lg.g.FailOver(replica)
	err := lg.e.CheckStore(context.Background())
	var l *engine.StoreLoss
	if !errors.As(err, &l) || !errors.Is(err, engine.ErrStoreBehind) {
		t.Fatalf("CheckStore = %v, want the loss", err)
	}
	if l.Lost != (engine.Span{From: 21, To: 24}) || l.Uncovered != l.Lost {
		t.Fatalf("loss %+v: want positions 21..24 lost and uncovered", l)
	}
	for range 2 {
		if _, err := lg.e.Process(context.Background(), lossFeed(13)); !errors.Is(err, engine.ErrStoreBehind) {
			t.Fatalf("Process while stopped = %v, want ErrStoreBehind", err)
		}
	}
	if _, err := lg.e.AcceptLoss(context.Background(), ""); err == nil {
		t.Fatal("AcceptLoss without an operator was taken")
	}
	if _, err := lg.e.AcceptLoss(context.Background(), "duty officer"); err != nil {
		t.Fatal(err)
	}
	if lg.e.Loss() != nil {
		t.Fatalf("still stopped: %v", lg.e.Loss())
	}
	if err := lg.feed(13, 14); err != nil {
		t.Fatal(err)
	}
	// Messages 11 and 12 are gone for good: the state says so exactly.
	var accepted *engine.AuditRecord
	err = lg.m.ScanChain(context.Background(), "m1", 1, func(r engine.AuditRecord) error {
		if r.Outcome == engine.OutcomeLossAccepted {
			accepted = &r
		}
		return nil
	})
	if err != nil || accepted == nil || accepted.Operator != "duty officer" {
		t.Fatalf("acceptance record %+v, %v: want one naming the operator", accepted, err)
	}
	if _, err := lg.e.AcceptLoss(context.Background(), "duty officer"); !errors.Is(err, engine.ErrNoLoss) {
		t.Fatalf("a second AcceptLoss = %v, want ErrNoLoss", err)
	}
}

// unreachable is a member's store handle whose writes fail while down is
// set (a promoted store that does not take writes yet), but for the first
// allow of them.
type unreachable struct {
	*groupMember // embedded under another name: a field named Member would hide the method
	down         atomic.Bool
	allow        atomic.Int64
}

type groupMember = memory.Member

var errUnreachable = errors.New("the store does not answer")

// Capabilities declares the wrapper in the store's place.
func (u *unreachable) Capabilities() engine.Capabilities {
	c := u.groupMember.Capabilities()
	c.Shared = u
	return c
}

func (u *unreachable) Update(ctx context.Context, r *engine.Reads, decide func(*engine.Rows) (*engine.Batch, error)) error {
	if u.down.Load() && u.allow.Add(-1) < 0 {
		return errUnreachable
	}
	return u.groupMember.Update(ctx, r, decide)
}

// openUnreachable opens lg's member through an unreachable handle, with
// a journal.
func (lg *lossGroup) openUnreachable() *unreachable {
	lg.t.Helper()
	var err error
	if lg.m, err = lg.g.Open("m1"); err != nil {
		lg.t.Fatal(err)
	}
	u := &unreachable{groupMember: lg.m}
	if lg.j, err = journal.Open(lg.jd, journal.Options{}); err != nil {
		lg.t.Fatal(err)
	}
	if lg.e, err = engine.New(context.Background(), u, engine.Options{Routes: []engine.Route{incidentRoute, meterRoute}, StoreName: "memory", Journal: lg.j}); err != nil {
		lg.t.Fatal(err)
	}
	lg.t.Cleanup(lg.close)
	return u
}

// TestASecondFailoverBeforeTheRecoveryIsDoneLosesNothing: a second
// failover moves the recovery's start down; the recovery resumes from
// there, also when it had begun on the store it left and the member is
// killed after it (a restart resumes from the journal's start marker).
func TestASecondFailoverBeforeTheRecoveryIsDoneLosesNothing(t *testing.T) {
	for _, tc := range []struct {
		name          string
		partly, crash bool
	}{
		{"while the member runs", false, false},
		{"with the member killed in between", false, true},
		{"its recovery cut short, while the member runs", true, false},
		{"its recovery cut short, with the member killed after it", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
			u := lg.openUnreachable()
			if err := lg.feed(1, 10); err != nil {
				t.Fatal(err)
			}
			older := lg.g.Checkpoint()
			if err := lg.feed(11, 20); err != nil {
				t.Fatal(err)
			}
			newer := lg.g.Checkpoint()
			if err := lg.feed(21, 30); err != nil {
				t.Fatal(err)
			}
			lg.g.FailOver(newer) // lost 21..30; the recovery cannot write
			u.down.Store(true)
			if err := lg.e.CheckStore(context.Background()); !errors.Is(err, engine.ErrStoreBehind) {
				t.Fatalf("CheckStore on a store that takes no writes = %v, want the loss", err)
			}
			lg.g.FailOver(older) // and now 11..30
			if tc.partly {
				// The resumed recovery commits 3 batches, then the store
				// fails again.
				u.allow.Store(3)
				if err := lg.e.CheckStore(context.Background()); !errors.Is(err, engine.ErrStoreBehind) {
					t.Fatalf("CheckStore = %v, want the recovery to fail part-way", err)
				}
			}
			u.down.Store(false)
			if tc.crash {
				lg.close()
				lg.open(true)
			} else if err := lg.e.CheckStore(context.Background()); err != nil {
				t.Fatal(err)
			}
			lg.check(30)
		})
	}
}

func TestAHeldMessageIsHeldAgainWhenItIsDecidedAgain(t *testing.T) {
	lg := newLossGroup(t, true)
	ctx := context.Background()
	incident := func(boot, seq int) []engine.Message {
		return []engine.Message{{Topic: "incidents/7", Payload: fmt.Appendf(nil, `{"agency":"fd","source_id":"e7","sequence":%d,"boot_id":%d,"incident_id":7,"casualty_delta":1}`, seq, boot)}}
	}
	for s := 1; s <= 3; s++ {
		if _, err := lg.e.Process(ctx, incident(2, s)); err != nil {
			t.Fatal(err)
		}
	}
	replica := lg.g.Checkpoint()
	out, err := lg.e.Process(ctx, incident(1, 99)) // from a boot older than those kept
	if err != nil || out[0].Outcome != engine.Quarantined {
		t.Fatalf("a message of an old boot: %+v, %v; want it quarantined", out, err)
	}
	if _, err := lg.e.Process(ctx, incident(2, 4)); err != nil {
		t.Fatal(err)
	}
	lg.g.FailOver(replica)
	if err := lg.e.CheckStore(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := lg.e.ReadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name == "incident/7" && s.Fields.Get("casualties").Num != "4" {
			t.Fatalf("incident/7 casualties %s after the recovery, want 4: the held message must stay held", s.Fields.Get("casualties").Num)
		}
	}
	var held int
	if err := lg.m.ScanQuarantine(ctx, func(engine.QuarantineEntry) error { held++; return nil }); err != nil {
		t.Fatal(err)
	}
	if held != 1 {
		t.Fatalf("%d quarantine entries after the recovery, want the old boot's message held again", held)
	}
}

// TestAStoreThatComesBackWholeHasLostNothing: a store that fails back to
// the old primary, which holds every commit, has lost nothing: no recovery
// record, and no fork found at the next start, also when the recovery had
// written some batches to the promoted store (the journal's newest batch
// is then on the abandoned chain; its end names the store's head).
func TestAStoreThatComesBackWholeHasLostNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		written int64 // the recovery's batches the promoted store took before it failed
	}{
		{"failed back before the replica took a write", 0},
		{"failed back after the recovery wrote two batches to the replica", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
			u := lg.openUnreachable()
			if err := lg.feed(1, 10); err != nil {
				t.Fatal(err)
			}
			replica := lg.g.Checkpoint()
			if err := lg.feed(11, 20); err != nil {
				t.Fatal(err)
			}
			primary := lg.g.Checkpoint()
			lg.g.FailOver(replica)
			u.down.Store(true)
			u.allow.Store(tc.written)
			if err := lg.e.CheckStore(context.Background()); !errors.Is(err, engine.ErrStoreBehind) {
				t.Fatalf("CheckStore = %v, want the loss", err)
			}
			lg.g.FailOver(primary) // failed back: the old primary holds every commit
			u.down.Store(false)
			if err := lg.e.CheckStore(context.Background()); err != nil {
				t.Fatal(err)
			}
			lg.check(20)
			var recovered int
			if err := lg.m.ScanChain(context.Background(), "m1", 1, func(r engine.AuditRecord) error {
				if r.Outcome == engine.OutcomeRecovered {
					recovered++
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if recovered != 0 {
				t.Fatalf("%d recovery records for a store that lost nothing in the end", recovered)
			}
			lg.close() // restarted before its next batch
			lg.open(true)
			if l := lg.e.Loss(); l != nil {
				t.Fatalf("after restart on the store that holds everything: %v", l)
			}
			if err := lg.feed(21, 22); err != nil {
				t.Fatal(err)
			}
			lg.check(22)
		})
	}
}

// TestAnAcceptanceWhoseRecoveryFailsIsRecordedAndSaysSo: an operator's
// acceptance is recorded, and the recovery of what the journal holds
// after it fails (the store stops taking writes): AcceptLoss says the
// loss is accepted and the recovery is tried again, not the loss itself,
// which would ask for the acceptance again; a second acceptance finds
// nothing to accept; and the member recovers once the store takes
// writes.
func TestAnAcceptanceWhoseRecoveryFailsIsRecordedAndSaysSo(t *testing.T) {
	ctx := context.Background()
	lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
	u := lg.openUnreachable()
	replica := lg.g.Checkpoint()
	if err := lg.feed(1, 1); err != nil { // positions 1 and 2
		t.Fatal(err)
	}
	lg.g.FailOver(replica)
	forkChain(t, lg.m, "m1") // the store holds another chain for the member, 1 to 3
	if err := lg.e.CheckStore(ctx); lg.e.Loss() == nil || !lg.e.Loss().Forked {
		t.Fatalf("CheckStore = %v, loss %+v; want a fork", err, lg.e.Loss())
	}
	u.down.Store(true)
	u.allow.Store(1) // the acceptance's record; not the recovery after it
	_, err := lg.e.AcceptLoss(ctx, "duty officer")
	if !errors.Is(err, engine.ErrRecoveryRetried) || strings.Contains(err.Error(), "accept-loss") || !strings.Contains(err.Error(), errUnreachable.Error()) {
		t.Fatalf("AcceptLoss with the recovery failing = %v, want ErrRecoveryRetried with the store's words", err)
	}
	if lg.e.Loss() == nil {
		t.Fatal("the member runs on before its recovery")
	}
	if _, err := lg.e.AcceptLoss(ctx, "duty officer"); !errors.Is(err, engine.ErrLossCovered) {
		t.Fatalf("a second AcceptLoss = %v, want ErrLossCovered", err)
	}
	u.down.Store(false)
	if err := lg.e.CheckStore(ctx); err != nil || lg.e.Loss() != nil {
		t.Fatalf("CheckStore once the store takes writes = %v, loss %v", err, lg.e.Loss())
	}
}

// TestAChainWrittenBelowTheMembersHeadIsAForkForAnOperator: the store
// lost commits of the member, and something else wrote records under its
// id after what it kept (a command run as the member, its lease lost
// too), ending inside one of the member's batches. The store's head is
// below the member's, but it is not the member's: taken for it, the
// batches it wrote over would never be decided again. It is a fork: the
// member stops until an operator accepts the store's chain, and what the
// journal holds after the last batch the store kept is decided again
// then; so too where the records written reach past the member's head.
func TestAChainWrittenBelowTheMembersHeadIsAForkForAnOperator(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kept      int // messages the store kept, two records each
		foreign   int // records written under the member's id after them
		at        int // the position told forked
		uncovered engine.Span
	}{
		{"over every record", 0, 3, 3, engine.Span{From: 1, To: 20}},
		{"after the records the store kept", 5, 3, 13, engine.Span{From: 11, To: 20}},
		{"past the member's head", 5, 12, 20, engine.Span{From: 11, To: 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			lg := newLossGroup(t, true)
			if err := lg.feed(1, tc.kept); err != nil {
				t.Fatal(err)
			}
			replica := lg.g.Checkpoint()
			if err := lg.feed(tc.kept+1, 10); err != nil { // up to position 20
				t.Fatal(err)
			}
			lg.g.FailOver(replica)
			writeOn(t, lg.m, "m1", tc.foreign)
			err := lg.e.CheckStore(ctx)
			var l *engine.StoreLoss
			if !errors.As(err, &l) || !l.Forked || !strings.Contains(err.Error(), fmt.Sprintf("another record at position %d ", tc.at)) || l.Uncovered != tc.uncovered {
				t.Fatalf("CheckStore = %v (%+v), want a fork at position %d, positions %s to accept", err, l, tc.at, tc.uncovered)
			}
			if _, err := lg.e.Process(ctx, lossFeed(11)); !errors.Is(err, engine.ErrStoreBehind) {
				t.Fatalf("Process before the acceptance = %v, want ErrStoreBehind", err)
			}
			if _, err := lg.e.AcceptLoss(ctx, "duty officer"); err != nil {
				t.Fatal(err)
			}
			if err := lg.feed(11, 12); err != nil {
				t.Fatal(err)
			}
			lg.check(12)
		})
	}
}

// writeOn commits n records for member on m after its chain's head, as
// something other than the member would.
func writeOn(t *testing.T, m *memory.Member, member string, n int) {
	t.Helper()
	head, err := m.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	commitAfter(t, m, member, head, n)
}

// TestALossAfterAnAcceptedForkIsNoFork: once an operator accepted a fork,
// the store's records it took for the member's stand for its chain. A
// later failover to a copy that ends in them lost only the member's
// commits after the acceptance: the journal gives them back, with no fork
// told over the member's own batches the accepted records had replaced.
func TestALossAfterAnAcceptedForkIsNoFork(t *testing.T) {
	ctx := context.Background()
	lg := newLossGroup(t, true)
	if err := lg.feed(1, 5); err != nil { // positions 1 to 10
		t.Fatal(err)
	}
	kept := lg.g.Checkpoint()
	if err := lg.feed(6, 10); err != nil { // 11 to 20
		t.Fatal(err)
	}
	lg.g.FailOver(kept)
	writeOn(t, lg.m, "m1", 2) // 11 and 12, where the member's batch of 11 and 12 was
	forked := lg.g.Checkpoint()
	writeOn(t, lg.m, "m1", 1) // 13, ending inside the member's batch of 13 and 14
	if err := lg.e.CheckStore(ctx); lg.e.Loss() == nil || !lg.e.Loss().Forked {
		t.Fatalf("CheckStore = %v, want a fork", err)
	}
	if _, err := lg.e.AcceptLoss(ctx, "duty officer"); err != nil {
		t.Fatal(err)
	}
	if err := lg.feed(11, 12); err != nil {
		t.Fatal(err)
	}
	lg.g.FailOver(forked) // ends inside the accepted records: the acceptance and all after it lost
	if err := lg.e.CheckStore(ctx); err != nil || lg.e.Loss() != nil {
		t.Fatalf("CheckStore after a failover to the accepted chain = %v, loss %v; want the journal to give the rest back", err, lg.e.Loss())
	}
	lg.check(12)
}

// TestAnAcceptanceTheStoreDidNotRecordWithoutAJournalIsAskedForAgain: with
// no journal, nothing but the loss_accepted record says a loss was
// accepted. When the store refuses that record, the acceptance did not
// happen: the member stays stopped for one, and the next check neither
// recovers from a journal there is none of nor fails on it.
func TestAnAcceptanceTheStoreDidNotRecordWithoutAJournalIsAskedForAgain(t *testing.T) {
	ctx := context.Background()
	lg := &lossGroup{t: t, g: memory.NewGroup(0, 0), jd: t.TempDir()}
	var err error
	if lg.m, err = lg.g.Open("m1"); err != nil {
		t.Fatal(err)
	}
	u := &unreachable{groupMember: lg.m}
	if lg.e, err = engine.New(ctx, u, engine.Options{Routes: []engine.Route{incidentRoute, meterRoute}, StoreName: "memory"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lg.close)
	if err := lg.feed(1, 10); err != nil {
		t.Fatal(err)
	}
	replica := lg.g.Checkpoint()
	if err := lg.feed(11, 12); err != nil {
		t.Fatal(err)
	}
	lg.g.FailOver(replica)
	if err := lg.e.CheckStore(ctx); !errors.Is(err, engine.ErrStoreBehind) {
		t.Fatalf("CheckStore = %v, want the loss", err)
	}
	u.down.Store(true)
	if _, err := lg.e.AcceptLoss(ctx, "duty officer"); err == nil || errors.Is(err, engine.ErrRecoveryRetried) {
		t.Fatalf("AcceptLoss with the store refusing its record = %v, want its error", err)
	}
	u.down.Store(false)
	if err := lg.e.CheckStore(ctx); !errors.Is(err, engine.ErrStoreBehind) || strings.Contains(err.Error(), "accepted") {
		t.Fatalf("CheckStore after the acceptance failed = %v, want the loss, not accepted", err)
	}
	if _, err := lg.e.AcceptLoss(ctx, "duty officer"); err != nil {
		t.Fatal(err)
	}
	if lg.e.Loss() != nil {
		t.Fatalf("still stopped: %v", lg.e.Loss())
	}
}
