package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/store/memory"
)

// groupMember opens the app of member on g, as `run` would on a shared
// store, with audit retention keeping 10 records of each chain and a file
// sink named jsonl writing sinkPath.
func groupMember(t *testing.T, g *memory.Group, member, archive, sinkPath string) *App {
	t.Helper()
	yaml := fmt.Sprintf(`store: {kind: postgres, url: 'postgres://db/rg', member: %s}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
audit:
  retention: {max_records: 10, interval: 20ms}
  archive: %s
  sinks: [{name: jsonl, kind: file, path: %s}]
`, member, archive, sinkPath)
	cfg, err := config.Parse([]byte(yaml), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := g.Open(member)
	if err != nil {
		t.Fatal(err)
	}
	a, err := openOn(t.Context(), cfg, cfg.Store, h, Options{Sinks: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// decide has the app decide n fresh readings of its own meter, 10 a batch.
func decide(t *testing.T, a *App, from, n int) {
	t.Helper()
	for i := from; i < from+n; i += 10 {
		msgs := make([]engine.Message, 0, 10)
		for j := i; j < min(i+10, from+n); j++ {
			msgs = append(msgs, engine.Message{Topic: "plant/" + a.Engine.Member() + "/energy",
				Payload: fmt.Appendf(nil, `{"msgId":"%s-%d"}`, a.Engine.Member(), j)})
		}
		if _, err := a.Engine.Process(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
}

// runChains runs the app's chains until the returned stop is called.
func runChains(t *testing.T, a *App) (stop func()) {
	t.Helper()
	c, err := a.chainWork()
	if err != nil || c == nil {
		t.Fatalf("chainWork = %v, %v", c, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// sinkChains reads the file sink's records, chain by chain, checking each
// line is a record.
func sinkChains(t *testing.T, paths ...string) map[string][]uint64 {
	t.Helper()
	out := map[string][]uint64{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var r engine.AuditRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			out[r.Member] = append(out[r.Member], r.Position)
		}
	}
	return out
}

// inOrder reports whether got holds 1..head, each record once at least,
// and once a position was passed never goes back but to resend.
func inOrder(got []uint64, head uint64) string {
	high := uint64(0)
	for i, p := range got {
		if p > high+1 {
			return fmt.Sprintf("position %d (index %d) after %d: a record skipped", p, i, high)
		}
		high = max(high, p)
	}
	if high != head {
		return fmt.Sprintf("up to %d of %d", high, head)
	}
	return ""
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// TestGroupMembersStreamAndTrimTheirChainsAndTakeOverAGoneOnes runs two
// members of a group in memory, each with retention and a file sink. m2's
// sink cannot write, so its chain stays whole in the store; once m2 is
// killed and its chain claim expired, m1 streams m2's chain from its
// cursor into its own file and trims it into m2's part of the archive.
func TestGroupMembersStreamAndTrimTheirChainsAndTakeOverAGoneOnes(t *testing.T) {
	dir := t.TempDir()
	archive, file1 := filepath.Join(dir, "archive"), filepath.Join(dir, "m1.jsonl")
	g := memory.NewGroup(0, 0)
	g.SetClaimTTL(300 * time.Millisecond)
	a1 := groupMember(t, g, "m1", archive, file1)
	// m2's sink directory goes away once its sinks are open (a mount
	// lost): they refuse one missing at start.
	if err := os.Mkdir(filepath.Join(dir, "missing"), 0o700); err != nil {
		t.Fatal(err)
	}
	a2 := groupMember(t, g, "m2", archive, filepath.Join(dir, "missing", "m2.jsonl"))
	if err := os.Remove(filepath.Join(dir, "missing")); err != nil {
		t.Fatal(err)
	}
	ro, _ := g.Open("")
	base := func(member string) uint64 {
		b, err := ro.ChainBase(t.Context(), member)
		if err != nil {
			t.Fatal(err)
		}
		return b.Position
	}
	decide(t, a1, 0, 60)
	decide(t, a2, 0, 40)
	runChains(t, a1)
	kill2 := runChains(t, a2)
	decide(t, a1, 60, 40) // woken by the commits
	eventually(t, "m1's chain delivered and trimmed to 10 records", func() bool { return base("m1") == 90 })
	if base("m2") != 0 {
		t.Fatalf("m2's chain was trimmed to %d while its sink had delivered nothing", base("m2"))
	}

	a2.Store.(*memory.Member).Kill() // its claims stay until they expire
	kill2()
	eventually(t, "m2's chain taken over, delivered and trimmed", func() bool { return base("m2") == 30 })
	decide(t, a1, 100, 15)
	eventually(t, "m1's chain trimmed again", func() bool { return base("m1") == 105 })

	got := sinkChains(t, file1)
	for member, head := range map[string]uint64{"m1": 115, "m2": 40} {
		if why := inOrder(got[member], head); why != "" {
			t.Errorf("the file sink holds %s's chain %s: %v", member, why, got[member])
		}
	}
	res, err := audit.VerifyChainsWithArchive(t.Context(), archive, ro, ro)
	if err != nil {
		t.Fatalf("VerifyChainsWithArchive = %+v, %v", res, err)
	}
	if len(res) != 2 || res[0].Archive.Records != 105 || res[1].Archive.Records != 30 || res[1].Stored != 10 {
		t.Fatalf("verified %+v; want 105 archived records of m1's chain, 30 of m2's with 10 stored", res)
	}
	bases, err := trimmedChains(t.Context(), ro)
	if err != nil || bases["m1"].Position != 105 || bases["m2"].Position != 30 {
		t.Fatalf("trimmedChains = %v, %v", bases, err)
	}
}

// TestIngestEndOnAGroupStreamsAndTrimsEveryChainItClaims is the end of an
// ingest on a shared store: it claims its own chain and that of a member
// that is gone, flushes both to the sink, trims both, and releases them.
func TestIngestEndOnAGroupStreamsAndTrimsEveryChainItClaims(t *testing.T) {
	dir := t.TempDir()
	archive, file := filepath.Join(dir, "archive"), filepath.Join(dir, "audit.jsonl")
	g := memory.NewGroup(0, 0)
	gone := groupMember(t, g, "ingest-1", archive, file)
	decide(t, gone, 0, 25)
	gone.Close() // ended without delivering or trimming (a sink was down, say)
	a := groupMember(t, g, "ingest-2", archive, file)
	decide(t, a, 0, 35)
	c, err := a.chainWork()
	if err != nil {
		t.Fatal(err)
	}
	var errs strings.Builder
	tool := &Tool{Config: a.Config, Err: &errs}
	if err := tool.finishChains(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"audit retention: 15 records of member ingest-1's chain archived in 1 segment to " + audit.ChainDir(archive, "ingest-1") + "; the store keeps its positions from 16\n",
		"audit retention: 25 records of member ingest-2's chain archived in 1 segment to " + audit.ChainDir(archive, "ingest-2") + "; the store keeps its positions from 26\n",
	} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("ingest said:\n%s\nwant the line\n%s", errs.String(), want)
		}
	}
	got := sinkChains(t, file)
	if inOrder(got["ingest-1"], 25) != "" || inOrder(got["ingest-2"], 35) != "" {
		t.Fatalf("the sink holds %v", got)
	}
	if claimed, err := a.Store.Capabilities().Keeper.ClaimChains(t.Context()); err != nil || len(claimed) != 2 {
		t.Fatalf("after the ingest released its claims, its handle claims %v, %v; want both chains again", claimed, err)
	}
	ro, _ := g.Open("")
	if _, err := audit.VerifyChainsWithArchive(t.Context(), archive, ro, ro); err != nil {
		t.Fatal(err)
	}
}

// TestReportOfTrimmedChains: an after-action report of a group whose
// chains retention trimmed reads each member's archive and store as one
// chain; without the archive a period that reaches before the store is
// refused, and one after the store's first record is verified from the
// bases trimmedChains reads (broken without them).
func TestReportOfTrimmedChains(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	g := memory.NewGroup(0, 0)
	a := groupMember(t, g, "m1", archive, filepath.Join(dir, "audit.jsonl"))
	decide(t, a, 0, 40)
	c, _ := a.chainWork()
	if err := (&Tool{Config: a.Config}).finishChains(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	ro, _ := g.Open("")
	bases, err := trimmedChains(t.Context(), ro)
	if err != nil || bases["m1"].Position != 30 {
		t.Fatalf("trimmedChains = %v, %v", bases, err)
	}
	build := func(o report.Options, archive report.Archive) (report.Verification, error) {
		recs, heads, err := report.Chains(t.Context(), ro, archive)
		if err != nil {
			t.Fatal(err)
		}
		o.Heads = heads
		rep, err := report.Build(recs, o)
		if err != nil {
			return report.Verification{}, err
		}
		return rep.Verification, nil
	}
	if _, err := build(report.Options{Bases: bases}, nil); err == nil || !strings.Contains(err.Error(), "positions 1..30 are not in the store") {
		t.Fatalf("a report of the whole log without the archive: %v; want the archived positions named", err)
	}
	v, err := build(report.Options{Bases: bases, Archive: archive}, archiveReader(archive))
	if err != nil || !v.Intact || v.Chains[0].Records != 40 || v.Chains[0].Archived != 30 {
		t.Fatalf("with the archive: %+v, %v; want one intact chain of 40 records, 30 from the archive", v, err)
	}
	var first time.Time
	ro.ScanChain(t.Context(), "m1", 1, func(r engine.AuditRecord) error { first = r.Time; return errors.New("first only") })
	after := report.Options{From: first.Add(time.Nanosecond)}
	if v, err := build(after, nil); err != nil || v.Intact {
		t.Fatalf("after the store's first record, without the bases: %+v, %v; want the trimmed chain broken", v, err)
	}
	after.Bases = bases
	if v, err := build(after, nil); err != nil || !v.Intact || v.Chains[0].Records != 10 {
		t.Fatalf("after the store's first record, with the bases: %+v, %v; want the 10 stored records intact", v, err)
	}
}

// An entity's lineage on a shared store reads every member's chain, each
// from its archive first: two members' adds to one meter, most of them
// archived by retention, sum to its state, and the replays each member
// suppressed are listed beside the reading they repeated.
func TestLineageReadsEveryChainAndItsArchive(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "archive")
	g := memory.NewGroup(0, 0)
	members := map[string]*App{}
	for _, m := range []string{"m1", "m2"} {
		cfg, err := config.Parse(fmt.Appendf(nil, `store: {kind: postgres, url: 'postgres://db/rg', member: %s}
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects: [{entity: "meter/{topic[1]}", add: {kwh: kwh}}]
audit:
  retention: {max_records: 10, interval: 20ms}
  archive: %s
`, m, archive), "rg.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := g.Open(m)
		if err != nil {
			t.Fatal(err)
		}
		a, err := openOn(t.Context(), cfg, cfg.Store, h, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		members[m] = a
	}
	reading := func(i int) engine.Message {
		return engine.Message{Topic: "plant/main/energy", Payload: fmt.Appendf(nil, `{"msgId":"r%d","kwh":0.25}`, i)}
	}
	for i := 0; i < 60; i += 10 {
		for _, m := range []string{"m1", "m2"} {
			var msgs []engine.Message
			for j := i; j < i+10; j++ {
				if (j%2 == 0) == (m == "m1") {
					msgs = append(msgs, reading(j))
				}
			}
			msgs = append(msgs, reading(i)) // a replay, or the other member's message
			if _, err := members[m].Engine.Process(t.Context(), msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, a := range members {
		c, _ := a.chainWork()
		if err := (&Tool{Config: a.Config}).finishChains(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	ro, _ := g.Open("")
	if bases, err := trimmedChains(t.Context(), ro); err != nil || bases["m1"].Position == 0 || bases["m2"].Position == 0 {
		t.Fatalf("retention trimmed %v, %v; want both chains trimmed", bases, err)
	}
	ls, err := StoreLineages(t.Context(), ro, archive, report.LineageOptions{Entities: []string{"meter/main"}})
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	byMember := map[string]int{}
	for _, c := range l.Changes {
		byMember[c.Member]++
	}
	if len(l.Changes) != 60 || byMember["m1"] == 0 || byMember["m2"] == 0 || string(l.State["kwh"]) != "15" || l.Suppressed != 12 {
		t.Fatalf("lineage: %d changes (%v), state %s, %d suppressed; want 60 from both members, kwh 15, 12 suppressed", len(l.Changes), byMember, l.State["kwh"], l.Suppressed)
	}
	// Without the archive the chains begin past position 1: a part of the
	// lineage is an error that says what is missing, never a shorter one.
	if _, err := StoreLineages(t.Context(), ro, "", report.LineageOptions{Entities: []string{"meter/main"}}); err == nil || !strings.Contains(err.Error(), "are not in it (audit retention archived them)") {
		t.Fatalf("without the archive: %v", err)
	}
}

func TestAMemberIDThatIsNoDirectoryIsRefusedBeforeRetention(t *testing.T) {
	cfg, err := config.Parse([]byte(`store: {kind: postgres, url: 'postgres://db/rg'}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
audit:
  retention: {max_records: 10}
  archive: `+t.TempDir()+`
`), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := memory.NewGroup(0, 0).Open("site-a/rg-1") // the member id as the MQTT client id gives it
	if err != nil {
		t.Fatal(err)
	}
	a, err := openOn(t.Context(), cfg, cfg.Store, h, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.chainWork(); err == nil || !strings.Contains(err.Error(), `member id "site-a/rg-1" holds a path separator`) {
		t.Fatalf("chainWork = %v", err)
	}
}

// keeperFailing is a chain keeper whose claims fail while fail is set,
// and that notes its releases.
type keeperFailing struct {
	engine.ChainKeeper
	mu       sync.Mutex
	fail     bool
	released []string
}

func (k *keeperFailing) ClaimChains(ctx context.Context) ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail {
		return nil, errors.New("statement timeout")
	}
	return k.ChainKeeper.ClaimChains(ctx)
}

func (k *keeperFailing) ReleaseChain(ctx context.Context, member string) error {
	k.mu.Lock()
	k.released = append(k.released, member)
	k.mu.Unlock()
	return k.ChainKeeper.ReleaseChain(ctx, member)
}

// memberChains is the chain work of member m1 of a memory group, with an
// archive and a file sink, after ten decisions.
func memberChains(t *testing.T) *chains {
	t.Helper()
	dir := t.TempDir()
	a := groupMember(t, memory.NewGroup(0, 0), "m1", filepath.Join(dir, "archive"), filepath.Join(dir, "audit.jsonl"))
	decide(t, a, 0, 10)
	c, err := a.chainWork()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChainsAreGivenUpBeforeTheirClaimsCanExpire: claims that cannot be
// renewed stand while more than a third of their lifetime is left, then
// the process stops streaming and trimming the chains, before another
// process could claim them; a chain given up is released only once the
// retention pass on it stopped.
func TestChainsAreGivenUpBeforeTheirClaimsCanExpire(t *testing.T) {
	c := memberChains(t)
	k := &keeperFailing{ChainKeeper: c.g.ChainKeeper}
	c.g.ChainKeeper = k
	c.ttl, c.every = 600*time.Millisecond, 200*time.Millisecond
	if err := c.claim(t.Context()); err != nil || !c.owned("m1") {
		t.Fatalf("claim = %v, owned %v", err, c.owned("m1"))
	}
	k.mu.Lock()
	k.fail = true
	k.mu.Unlock()
	if err := c.claim(t.Context()); err == nil || !c.owned("m1") {
		t.Fatalf("a failed renewal at once: %v, owned %v; want the claim to stand", err, c.owned("m1"))
	}
	time.Sleep(c.ttl - c.every)
	if c.owned("m1") {
		t.Fatal("the chain is still owned with a third of its claim's lifetime left")
	}
	c.claim(t.Context())
	if c.claimed != nil {
		t.Fatalf("after the claims lapsed the process still claims %v", c.claimed)
	}

	// Claimed again; a pass on m1 holds its lock while the store stops
	// giving the chain to this process.
	k.mu.Lock()
	k.fail = false
	k.mu.Unlock()
	if err := c.claim(t.Context()); err != nil || !c.owned("m1") {
		t.Fatalf("claim = %v, owned %v", err, c.owned("m1"))
	}
	pass := c.pass("m1")
	pass.Lock()
	released := make(chan struct{})
	go func() { defer close(released); c.logChanges(t.Context(), []string{"m1"}, nil) }()
	time.Sleep(50 * time.Millisecond)
	k.mu.Lock()
	early := slices.Clone(k.released)
	k.mu.Unlock()
	pass.Unlock()
	<-released
	if len(early) != 0 || !slices.Equal(k.released, []string{"m1"}) {
		t.Fatalf("released %v while the pass ran, %v after it", early, k.released)
	}
}

// TestAChainRetentionCannotTrimLeavesTheOthersTrimmed: a departed member
// whose id holds a slash (it ran without retention) has a chain retention
// refuses; retention goes on to the chains after it.
func TestAChainRetentionCannotTrimLeavesTheOthersTrimmed(t *testing.T) {
	dir := t.TempDir()
	g := memory.NewGroup(0, 0)
	cfg, err := config.Parse([]byte(`store: {kind: postgres, url: 'postgres://db/rg', member: 'a/old'}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
`), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := g.Open("a/old")
	if err != nil {
		t.Fatal(err)
	}
	old, err := openOn(t.Context(), cfg, cfg.Store, h, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	decide(t, old, 0, 30)
	old.Close()
	a := groupMember(t, g, "m1", filepath.Join(dir, "archive"), filepath.Join(dir, "audit.jsonl"))
	decide(t, a, 0, 50)
	c, err := a.chainWork()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.claim(t.Context()); err != nil || !slices.Equal(c.claimed, []string{"a/old", "m1"}) {
		t.Fatalf("claimed %v, %v", c.claimed, err)
	}
	res, err := c.trim(t.Context())
	if err == nil || !strings.Contains(err.Error(), `member a/old's chain`) || len(res) != 1 || res[0].Member != "m1" {
		t.Fatalf("trim = %+v, %v; want m1's chain passed on and a/old's refused", res, err)
	}
}

// hangingScanner is a chain scanner whose heads hang, while hang is set,
// until the caller gives up.
type hangingScanner struct {
	engine.ChainScanner
	hang atomic.Bool
}

func (h *hangingScanner) Chains(ctx context.Context) ([]engine.Chain, error) {
	if h.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.ChainScanner.Chains(ctx)
}

// TestAStopIsNotHeldUpByAStoreThatHangsWhileClaimingChains: a store that
// stops answering while the chains' heads are read fails the claim within
// its period, during the run and at a stop (whose flush renews the claims
// first), instead of holding the process up for as long as the store
// hangs.
func TestAStopIsNotHeldUpByAStoreThatHangsWhileClaimingChains(t *testing.T) {
	c := memberChains(t)
	h := &hangingScanner{ChainScanner: c.g.ChainScanner}
	c.g.ChainScanner = h
	c.ttl, c.every, c.stopFlush = 3*time.Second, time.Second, time.Second
	if err := c.claim(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.hang.Store(true)
	claimed := make(chan error, 1)
	go func() { claimed <- c.claim(t.Context()) }()
	select {
	case err := <-claimed:
		if err == nil {
			t.Fatal("a claim whose heads hang succeeded")
		}
	case <-time.After(3 * c.every):
		t.Fatalf("a claim whose heads hang still waits after %v; want it to fail within %v", 3*c.every, c.every)
	}
	ctx, stop := context.WithCancel(t.Context())
	stop()
	ended := make(chan struct{})
	go func() { defer close(ended); c.Run(ctx) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end 10 s after its stop, the store hanging")
	}
}

// slowScanner is a chain scanner whose chain scans each take delay.
type slowScanner struct {
	engine.ChainScanner
	delay time.Duration
}

func (s *slowScanner) ScanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error {
	time.Sleep(s.delay)
	return s.ChainScanner.ScanChain(ctx, member, from, fn)
}

// TestAnIngestWhoseRetentionOutlastsTheClaimsStillTrimsItsChains: at its
// end an ingest claims the chains once, delivers them to the sinks (up to
// 10 s) and then trims them; retention stops on a chain whose claim is no
// longer fresh. Measured on PostgreSQL: an ingest of 55,207 lines whose
// sink flush and archive took longer than the claims' fresh part (10 s of
// their 15 s) sealed a segment, trimmed nothing and said nothing, exit 0.
// The claims must be renewed while the ingest streams and trims.
func TestAnIngestWhoseRetentionOutlastsTheClaimsStillTrimsItsChains(t *testing.T) {
	dir := t.TempDir()
	archive, file := filepath.Join(dir, "archive"), filepath.Join(dir, "audit.jsonl")
	g := memory.NewGroup(0, 0)
	g.SetClaimTTL(300 * time.Millisecond) // fresh for 200 ms after each claim
	gone := groupMember(t, g, "ingest-1", archive, file)
	decide(t, gone, 0, 25)
	gone.Close()
	a := groupMember(t, g, "ingest-2", archive, file)
	decide(t, a, 0, 35)
	c, err := a.chainWork()
	if err != nil {
		t.Fatal(err)
	}
	c.g.ChainScanner = &slowScanner{ChainScanner: c.g.ChainScanner, delay: 250 * time.Millisecond}
	var errs strings.Builder
	if err := (&Tool{Config: a.Config, Err: &errs}).finishChains(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"audit retention: 15 records of member ingest-1's chain archived in 1 segment to " + audit.ChainDir(archive, "ingest-1") + "; the store keeps its positions from 16\n",
		"audit retention: 25 records of member ingest-2's chain archived in 1 segment to " + audit.ChainDir(archive, "ingest-2") + "; the store keeps its positions from 26\n",
	} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("ingest said:\n%s\nwant the line\n%s", errs.String(), want)
		}
	}
}
