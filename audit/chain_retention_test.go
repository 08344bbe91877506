package audit_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// groupFeed is a memory group whose members each decide on an engine of
// their own, and a read-only handle for retention and verification.
type groupFeed struct {
	g       *memory.Group
	ro      *memory.Member // read-only
	other   *memory.Member // another process's, made by ro2
	members map[string]*memberFeed
}

type memberFeed struct {
	m    *memory.Member
	e    *engine.Engine
	next int
}

func newGroupFeed(t *testing.T, members ...string) *groupFeed {
	t.Helper()
	f := &groupFeed{g: memory.NewGroup(0, 0), members: map[string]*memberFeed{}}
	for _, id := range members {
		m, err := f.g.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(t.Context(), m, engine.Options{Routes: meters})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(); m.Close() })
		f.members[id] = &memberFeed{m: m, e: e}
	}
	f.ro, _ = f.g.Open("")
	return f
}

// decide has member decide n readings of its own meter, 100 to a batch.
func (f *groupFeed) decide(t *testing.T, member string, n int) {
	t.Helper()
	mf := f.members[member]
	for n > 0 {
		msgs := make([]engine.Message, min(n, 100))
		for i := range msgs {
			msgs[i] = engine.Message{Topic: "plant/" + member + "/energy", Payload: fmt.Appendf(nil, `{"msgId":"%s-%d","kwh":0.25}`, member, mf.next)}
			mf.next++
		}
		if _, err := mf.e.Process(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
		n -= len(msgs)
	}
}

// conflict has member decide a changed copy of its reading i: held.
func (f *groupFeed) conflict(t *testing.T, member string, i int) uint64 {
	t.Helper()
	msg := engine.Message{Topic: "plant/" + member + "/energy", Payload: fmt.Appendf(nil, `{"msgId":"%s-%d","kwh":9}`, member, i)}
	d, err := f.members[member].e.Process(t.Context(), []engine.Message{msg})
	if err != nil || d[0].Outcome != engine.Conflict {
		t.Fatalf("a changed copy: %v, %v", d, err)
	}
	return d[0].Position
}

func (f *groupFeed) head(t *testing.T, member string) uint64 {
	t.Helper()
	chains, err := f.ro.Chains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chains {
		if c.Member == member {
			return c.Head.Position
		}
	}
	return 0
}

// retention returns retention of member's chain, up to its head unless
// head says otherwise, through handle h.
func (f *groupFeed) retention(t *testing.T, h *memory.Member, dir, member string, opts audit.RetentionOptions) *audit.Retention {
	t.Helper()
	opts.Archive, opts.Member = dir, member
	if opts.Head == nil {
		opts.Head = func(context.Context) (uint64, error) { return f.head(t, member), nil }
	}
	r, err := audit.NewChainRetention(h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func once(t *testing.T, r *audit.Retention) audit.TrimResult {
	t.Helper()
	res, err := r.Once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestChainRetentionArchivesEachMembersChainOnItsOwn(t *testing.T) {
	f, dir := newGroupFeed(t, "m1", "m2"), t.TempDir()
	f.decide(t, "m1", 1000)
	f.decide(t, "m2", 300)
	a := f.members["m1"].m // m1's handle trims both chains, as after a takeover
	if res := once(t, f.retention(t, a, dir, "m1", audit.RetentionOptions{MaxRecords: 100, SegmentRecords: 400})); res.Segments != 3 || res.Records != 900 || res.Base.Position != 900 {
		t.Fatalf("m1's pass = %+v; want 900 records in 3 segments, base 900", res)
	}
	if b, err := f.ro.ChainBase(t.Context(), "m2"); err != nil || b.Position != 0 {
		t.Fatalf("m2's chain was trimmed with m1's: base %+v, %v", b, err)
	}
	if res := once(t, f.retention(t, a, dir, "m2", audit.RetentionOptions{MaxRecords: 50})); res.Records != 250 {
		t.Fatalf("m2's pass = %+v; want 250 records", res)
	}
	for member, first := range map[string]uint64{"m1": 401, "m2": 1} {
		m := manifest(t, audit.ChainDir(dir, member), first)
		if m.Member != member {
			t.Fatalf("the manifest of %s's segment from %d names member %q", member, first, m.Member)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "audit-*")); len(entries) != 0 {
		t.Fatalf("segments of a member's chain at the archive's top: %v", entries)
	}

	res, err := audit.VerifyChainsWithArchive(t.Context(), dir, f.ro, f.ro)
	if err != nil || len(res) != 2 {
		t.Fatalf("VerifyChainsWithArchive = %+v, %v", res, err)
	}
	for i, want := range []struct {
		member                 string
		segments               int
		archived, base, stored uint64
	}{{"m1", 3, 900, 900, 100}, {"m2", 1, 250, 250, 50}} {
		r := res[i]
		if r.Member != want.member || r.Archive.Segments != want.segments || r.Archive.Records != want.archived ||
			r.Base.Position != want.base || r.Stored != want.stored || r.Head.Position != want.base+want.stored {
			t.Errorf("chain %d verified %+v; want %+v", i, r, want)
		}
	}
	stored, err := audit.VerifyChains(t.Context(), f.ro, f.ro)
	if err != nil || stored[0].Base.Position != 900 || stored[0].Records != 100 || stored[1].Records != 50 {
		t.Fatalf("VerifyChains from the bases = %+v, %v", stored, err)
	}
	if _, err := audit.VerifyChains(t.Context(), f.ro, nil); !errors.Is(err, audit.ErrBroken) {
		t.Fatalf("VerifyChains of trimmed chains from position 1 = %v; want them broken (the bases are needed)", err)
	}
}

func TestChainRetentionIsHeldBackByItsMembersQuarantineOnly(t *testing.T) {
	f, dir := newGroupFeed(t, "m1", "m2", "m3"), t.TempDir()
	f.decide(t, "m1", 500)
	f.decide(t, "m2", 500)
	held := f.conflict(t, "m2", 3) // position 501 of m2's chain
	f.decide(t, "m2", 200)
	f.decide(t, "m3", 500)
	f.conflict(t, "m3", 3) // a later member's entry: above m2's ids
	f.decide(t, "m1", 200)
	keep := audit.RetentionOptions{MaxRecords: 10}
	if res := once(t, f.retention(t, f.ro2(t), dir, "m1", keep)); res.Base.Position != 690 {
		t.Fatalf("m1, which holds nothing, kept positions from %d; want 691 (the others' entries are theirs)", res.Base.Position+1)
	}
	r2 := f.retention(t, f.ro2(t), dir, "m2", keep)
	if res := once(t, r2); res.Base.Position != held-1 {
		t.Fatalf("m2 with its entry at %d held kept positions from %d; want %d", held, res.Base.Position+1, held)
	}
	bases, _ := f.ro.QuarantineBases(t.Context())
	if _, err := f.members["m2"].e.Discard(t.Context(), bases["m2"]+held, "a test reading", "op"); err != nil {
		t.Fatal(err)
	}
	if res := once(t, r2); res.Base.Position != f.head(t, "m2")-10 {
		t.Fatalf("m2 after its entry was discarded kept positions from %d; want the last 10", res.Base.Position+1)
	}
	if _, err := audit.VerifyChainsWithArchive(t.Context(), dir, f.ro, f.ro); err != nil {
		t.Fatal(err)
	}
}

// ro2 is a second writing handle on the group, as another process's.
func (f *groupFeed) ro2(t *testing.T) *memory.Member {
	t.Helper()
	if f.other == nil {
		m, err := f.g.Open("trimmer")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		f.other = m
	}
	return f.other
}

// TestChainRetentionStopsAtTheLowestSinkCursor: max_records counts back
// from the chain's head; an audit sink's cursor below that keeps what the
// sink has yet to deliver in the store, and the pass says which sink holds
// how many records beyond max_records.
func TestChainRetentionStopsAtTheLowestSinkCursor(t *testing.T) {
	f, dir := newGroupFeed(t, "m1"), t.TempDir()
	f.decide(t, "m1", 300)
	cursors := map[string]uint64{"collector": 120, "file": 295} // what each sink delivered, say
	r := f.retention(t, f.members["m1"].m, dir, "m1", audit.RetentionOptions{MaxRecords: 10,
		Cursors: func(_ context.Context, head uint64) (map[string]uint64, error) {
			if head != 300 {
				t.Errorf("the cursors are asked with head %d; want the chain's, 300", head)
			}
			return maps.Clone(cursors), nil
		}})
	res := once(t, r)
	if want := []audit.SinkHeld{{Sink: "collector", Cursor: 120, Records: 170}}; res.Base.Position != 120 || !slices.Equal(res.Held, want) {
		t.Fatalf("retention with a sink at 120 trimmed to %d, held %+v; want 120, and the 170 records up to 290 (300 less max_records) held by collector %+v",
			res.Base.Position, res.Held, want)
	}
	cursors["collector"] = 300
	if res := once(t, r); res.Base.Position != 290 || len(res.Held) != 0 {
		t.Fatalf("retention trimmed to %d, held %+v; want 290, none held", res.Base.Position, res.Held)
	}
}

func TestVerifyChainsWithArchiveFindsWhatIsMissingOrForeign(t *testing.T) {
	setup := func(t *testing.T) (*groupFeed, string) {
		f, dir := newGroupFeed(t, "m1", "m2"), t.TempDir()
		f.decide(t, "m1", 400)
		f.decide(t, "m2", 400)
		for _, m := range []string{"m1", "m2"} {
			once(t, f.retention(t, f.ro2(t), dir, m, audit.RetentionOptions{MaxRecords: 100, SegmentRecords: 100}))
		}
		return f, dir
	}
	t.Run("a segment of the second member's chain deleted is named with its member", func(t *testing.T) {
		f, dir := setup(t)
		removeSegment(t, audit.ChainDir(dir, "m2"), 101)
		res, err := audit.VerifyChainsWithArchive(t.Context(), dir, f.ro, f.ro)
		brokenAt(t, err, 101, "positions 101..200", "missing")
		var b *audit.BrokenError
		if errors.As(err, &b); b.Member != "m2" || len(res) != 2 || res[0].Stored != 100 {
			t.Fatalf("the break is in %q's chain after %+v; want m2's, after m1's whole chain", b.Member, res)
		}
	})
	t.Run("a member's archive put under another's name fails on its records", func(t *testing.T) {
		f, dir := setup(t)
		os.RemoveAll(audit.ChainDir(dir, "m1"))
		os.Rename(audit.ChainDir(dir, "m2"), audit.ChainDir(dir, "m1"))
		_, err := audit.VerifyChainsWithArchive(t.Context(), dir, f.ro, f.ro)
		brokenAt(t, err, 1, `names member "m2"`)
	})
	t.Run("an archive of a member the store has no chain of is refused", func(t *testing.T) {
		f, dir := setup(t)
		os.Mkdir(audit.ChainDir(dir, "m9"), 0o700)
		_, err := audit.VerifyChainsWithArchive(t.Context(), dir, f.ro, f.ro)
		brokenAt(t, err, 1, "member m9", "no chain")
	})
	t.Run("a chain whose archive is gone is missing its first positions", func(t *testing.T) {
		f, dir := setup(t)
		os.RemoveAll(audit.ChainDir(dir, "m1"))
		_, err := audit.VerifyChainsWithArchive(t.Context(), dir, f.ro, f.ro)
		brokenAt(t, err, 1, "positions 1..300 are in no archived segment")
	})
}

func TestNewRetentionRefusesTheWrongKindOfChain(t *testing.T) {
	f := newGroupFeed(t, "m1")
	head := func(context.Context) (uint64, error) { return 0, nil }
	if _, err := audit.NewChainRetention(f.ro, audit.RetentionOptions{Archive: t.TempDir(), MaxRecords: 1, Head: head}); !errors.Is(err, audit.ErrRetention) {
		t.Fatalf("NewChainRetention without a member = %v", err)
	}
	for _, m := range []string{"site-a/rg-1", `site-a\rg-1`, "../../x"} {
		_, err := audit.NewChainRetention(f.ro, audit.RetentionOptions{Archive: t.TempDir(), MaxRecords: 1, Head: head, Member: m})
		if !errors.Is(err, audit.ErrRetention) || !strings.Contains(err.Error(), "path separator") {
			t.Errorf("NewChainRetention of member %q = %v", m, err)
		}
	}
	_, err := audit.NewRetention(memory.New(), audit.RetentionOptions{Archive: t.TempDir(), MaxRecords: 1, Head: head, Member: "m1"})
	if !errors.Is(err, audit.ErrRetention) || !strings.Contains(err.Error(), "NewChainRetention") {
		t.Fatalf("NewRetention with a member = %v", err)
	}
}

func TestChainRetentionStopsOnceTheChainIsNoLongerOwned(t *testing.T) {
	for _, tc := range []struct {
		name     string
		owned    int // calls of Owned that answer true
		segments int // sealed and trimmed
		files    []string
	}{
		{"never owned: nothing cleared, archived or trimmed", 0, 0, []string{".tmp-segment-left"}},
		{"lost while the second segment is read: it is not sealed", 5, 1, []string{"1..100"}},
		{"lost after the second segment is sealed: it is not trimmed", 6, 1, []string{"1..100", "101..200"}},
		{"owned throughout", 1 << 30, 3, []string{"1..100", "101..200", "201..300"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, dir := newGroupFeed(t, "m1"), t.TempDir()
			f.decide(t, "m1", 301)
			stale := filepath.Join(audit.ChainDir(dir, "m1"), ".tmp-segment-left")
			os.MkdirAll(filepath.Dir(stale), 0o700)
			os.WriteFile(stale, nil, 0o600)
			calls := 0
			r := f.retention(t, f.members["m1"].m, dir, "m1", audit.RetentionOptions{MaxRecords: 1, SegmentRecords: 100,
				Owned: func() bool { calls++; return calls <= tc.owned }})
			res := once(t, r)
			if res.Segments != tc.segments || res.Base.Position != uint64(100*tc.segments) {
				t.Fatalf("pass = %+v, want %d segments", res, tc.segments)
			}
			base, _ := f.ro.ChainBase(t.Context(), "m1")
			if base.Position != uint64(100*tc.segments) {
				t.Fatalf("the store's base is %d, want %d", base.Position, 100*tc.segments)
			}
			var want, got []string
			for _, f := range tc.files {
				if a, b, ok := strings.Cut(f, ".."); ok {
					var first, last uint64
					fmt.Sscan(a, &first)
					fmt.Sscan(b, &last)
					want = append(want, audit.SegmentName(first, last), audit.ManifestName(first, last))
				} else {
					want = append(want, f)
				}
			}
			entries, _ := os.ReadDir(audit.ChainDir(dir, "m1"))
			for _, e := range entries {
				got = append(got, e.Name())
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("the archive holds %v, want %v", got, want)
			}
			if _, err := audit.VerifyChainsWithArchive(t.Context(), dir, f.ro, f.ro); err != nil {
				t.Fatalf("archive and store: %v", err)
			}
		})
	}
}

// runningGroup is a read-only handle on a group whose members go on while
// audit verify reads it: between runs once between the reads of the heads
// and bases and the scan of a chain.
type runningGroup struct {
	*memory.Member
	between func()
}

func (g *runningGroup) ScanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error {
	if f := g.between; f != nil {
		g.between = nil
		f()
	}
	return g.Member.ScanChain(ctx, member, from, fn)
}

// TestVerifyOfARunningGroup: a member that commits, or retention that
// trims, between the verifier's reads of a chain's head and base and its
// scan is no break; a record removed meanwhile still is.
func TestVerifyOfARunningGroup(t *testing.T) {
	f, dir := newGroupFeed(t, "m1"), t.TempDir()
	f.decide(t, "m1", 300)
	once(t, f.retention(t, f.ro2(t), dir, "m1", audit.RetentionOptions{MaxRecords: 100}))
	g := &runningGroup{Member: f.ro, between: func() { f.decide(t, "m1", 5) }}
	if _, err := audit.VerifyChainsWithArchive(t.Context(), dir, g, f.ro); err != nil {
		t.Errorf("archive and store, 5 records committed meanwhile: %v", err)
	}
	g.between = func() { f.decide(t, "m1", 5) }
	if res, err := audit.VerifyChains(t.Context(), g, f.ro); err != nil || res[0].Records != 105 || res[0].Head.Position != 305 {
		t.Errorf("the store, 5 records committed meanwhile: %+v, %v; want the 105 up to the head read, 305", res, err)
	}
	g.between = func() { once(t, f.retention(t, f.ro2(t), dir, "m1", audit.RetentionOptions{MaxRecords: 10})) }
	if _, err := audit.VerifyChainsWithArchive(t.Context(), dir, g, f.ro); err != nil {
		t.Errorf("archive and store, trimmed meanwhile: %v", err)
	}
	g.between = func() {
		f.decide(t, "m1", 20)
		once(t, f.retention(t, f.ro2(t), dir, "m1", audit.RetentionOptions{MaxRecords: 10}))
	}
	if _, err := audit.VerifyChains(t.Context(), g, f.ro); err != nil {
		t.Errorf("the store, trimmed meanwhile: %v", err)
	}
	// A break that does not move is still one: the stored chain without
	// its archive starts after its base.
	g.between = func() { f.decide(t, "m1", 5) }
	if _, err := audit.VerifyChains(t.Context(), g, nil); err == nil {
		t.Error("a trimmed chain verified from position 1 without its base")
	}
}

// basesRead is a read-only handle on a group whose members go on while
// audit verify reads it: between runs once when a chain's base is read,
// after the heads were.
type basesRead struct {
	*memory.Member
	between func()
}

func (b *basesRead) ChainBase(ctx context.Context, member string) (engine.AuditHead, error) {
	if f := b.between; f != nil {
		b.between = nil
		f()
	}
	return b.Member.ChainBase(ctx, member)
}

// TestVerifyOfAGroupTrimmedPastTheHeadsRead: a member commits and
// retention trims past the head read with the chains, before the chain's
// base is read: no break.
func TestVerifyOfAGroupTrimmedPastTheHeadsRead(t *testing.T) {
	f, dir := newGroupFeed(t, "m1"), t.TempDir()
	f.decide(t, "m1", 300)
	once(t, f.retention(t, f.ro2(t), dir, "m1", audit.RetentionOptions{MaxRecords: 100}))
	goOn := func() {
		f.decide(t, "m1", 200)
		once(t, f.retention(t, f.ro2(t), dir, "m1", audit.RetentionOptions{MaxRecords: 10}))
	}
	b := &basesRead{Member: f.ro, between: goOn}
	if _, err := audit.VerifyChains(t.Context(), f.ro, b); err != nil {
		t.Errorf("the store: %v", err)
	}
	b.between = goOn
	if _, err := audit.VerifyChainsWithArchive(t.Context(), dir, f.ro, b); err != nil {
		t.Errorf("archive and store: %v", err)
	}
}
