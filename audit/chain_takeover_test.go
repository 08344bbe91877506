package audit_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// stalledTrim is a handle whose first TrimChain waits until released: a
// process paused (a slow store, a stop of the machine) between sealing a
// segment and trimming its records.
type stalledTrim struct {
	*memory.Member
	entered, release, done chan struct{}
	err                    error // the stalled trim's
	once                   sync.Once
}

func (s *stalledTrim) TrimChain(ctx context.Context, member string, below uint64, base engine.AuditHead) error {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.Member.TrimChain(ctx, member, below, base)
	}
	close(s.entered)
	<-s.release
	defer close(s.done)
	s.err = s.Member.TrimChain(ctx, member, below, base)
	return s.err
}

// scanHook runs before on its first ScanChain.
type scanHook struct {
	*memory.Member
	before func()
	once   sync.Once
}

func (s *scanHook) ScanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error {
	s.once.Do(s.before)
	return s.Member.ScanChain(ctx, member, from, fn)
}

// TestAChainTakenOverWhileItsTrimStallsLosesNothing: process A claimed the
// chain of m1, which is gone, sealed a segment of it and stalled in its
// trim until its claim ran out; process B claimed the chain, cleared what
// it took for a stale segment and archived again from the store; then A's
// trim came. It is refused (B holds the claim): every record is still in
// the archive or in the store, and they verify as one chain.
func TestAChainTakenOverWhileItsTrimStallsLosesNothing(t *testing.T) {
	f, dir := newGroupFeed(t, "m1"), t.TempDir()
	f.decide(t, "m1", 300)
	f.members["m1"].e.Close()
	f.members["m1"].m.Close() // m1 is gone: its chain is another's to trim
	f.g.SetClaimTTL(100 * time.Millisecond)
	claimM1 := func(m *memory.Member) bool {
		got, err := m.ClaimChains(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(got, "m1")
	}
	opts := audit.RetentionOptions{MaxRecords: 200, SegmentRecords: 100}
	pa, err := f.g.Open("a")
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	if !claimM1(pa) {
		t.Fatal("A did not claim m1's chain")
	}
	a := &stalledTrim{Member: pa, entered: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	go newRetention(t, f, a, dir, opts).Once(context.Background())
	<-a.entered // A sealed 1..100 and is about to trim

	pb, err := f.g.Open("b")
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !claimM1(pb) { // once A's claim has run out
		if time.Now().After(deadline) {
			t.Fatal("B did not claim m1's chain after A's claim ran out")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b := &scanHook{Member: pb, before: func() { close(a.release); <-a.done }}
	res := once(t, newRetention(t, f, b, dir, opts))
	if a.err == nil {
		t.Errorf("A's trim after its claim ran out was taken; B's pass: %+v", res)
	}
	if _, err := audit.VerifyChainsWithArchive(t.Context(), dir, f.ro, f.ro); err != nil {
		t.Fatalf("archive and store no longer verify as one chain: %v", err)
	}
}

// newRetention is retention of m1's chain through s.
func newRetention(t *testing.T, f *groupFeed, s audit.ChainStore, dir string, opts audit.RetentionOptions) *audit.Retention {
	t.Helper()
	opts.Archive, opts.Member = dir, "m1"
	opts.Head = func(context.Context) (uint64, error) { return f.head(t, "m1"), nil }
	r, err := audit.NewChainRetention(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// staleBase answers ChainBase with the zero base, whatever the store holds.
type staleBase struct{ *memory.Member }

func (staleBase) ChainBase(context.Context, string) (engine.AuditHead, error) {
	return engine.AuditHead{}, nil
}

// TestAPassThatFindsTheChainStartingAfterItsBaseSaysSo: records between
// the base retention read and the first the store holds are in no
// archived segment; the pass fails naming them, rather than finding
// nothing to archive.
func TestAPassThatFindsTheChainStartingAfterItsBaseSaysSo(t *testing.T) {
	f, dir := newGroupFeed(t, "m1"), t.TempDir()
	f.decide(t, "m1", 300)
	var recs []engine.AuditRecord
	if err := f.ro.ScanChain(t.Context(), "m1", 1, func(r engine.AuditRecord) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	m1 := f.members["m1"].m
	if err := m1.TrimChain(t.Context(), "m1", 151, engine.AuditHead{Position: recs[149].Position, Hash: recs[149].Hash}); err != nil {
		t.Fatal(err)
	}
	r := newRetention(t, f, staleBase{m1}, dir, audit.RetentionOptions{MaxRecords: 100, SegmentRecords: 100})
	res, err := r.Once(t.Context())
	if err == nil || !strings.Contains(err.Error(), "position 1") {
		t.Fatalf("a pass on a chain that starts at 151 after base 0 = %+v, %v; want it to name the missing records", res, err)
	}
}
