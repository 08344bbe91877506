package app

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/store/memory"
)

// echo is a processor that decides each message applied, naming it by its
// topic in the decision's ID, and fails when told to; it counts its calls
// and fails the test when two overlap.
type echo struct {
	t        *testing.T
	inCall   atomic.Bool
	calls    atomic.Int64
	combined atomic.Int64 // calls that held more than one feed's batch
	fail     atomic.Bool
}

func (e *echo) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	if !e.inCall.CompareAndSwap(false, true) {
		e.t.Error("two Process calls overlap")
	}
	defer e.inCall.Store(false)
	e.calls.Add(1)
	feeds := map[string]bool{}
	ds := make([]engine.Decision, len(msgs))
	for i, m := range msgs {
		feeds[m.Feed] = true
		ds[i] = engine.Decision{Outcome: engine.Applied, ID: m.Topic}
	}
	if len(feeds) > 1 {
		e.combined.Add(1)
	}
	if e.fail.Load() {
		return nil, errors.New("store down")
	}
	return ds, nil
}

// The feeds' processors never call the engine at once, combine the
// batches that wait into one call, and give each caller its own messages'
// decisions, named by its feed; a failed call fails every batch in it.
func TestFeedProcessorsCommitOneCallAtATime(t *testing.T) {
	p := &echo{t: t}
	procs := FeedProcessors(p, []string{"a", "b", "c"}, nil, nil)
	var wg sync.WaitGroup
	for _, f := range procs {
		wg.Go(func() {
			for round := range 300 {
				msgs := make([]engine.Message, 1+round%7)
				for i := range msgs {
					msgs[i].Topic = fmt.Sprintf("%s/%d/%d", f.name, round, i)
				}
				ds, err := f.Process(context.Background(), msgs)
				if err != nil || len(ds) != len(msgs) {
					t.Errorf("feed %s round %d: %d decisions for %d messages, %v", f.name, round, len(ds), len(msgs), err)
					return
				}
				for i, d := range ds {
					if d.ID != msgs[i].Topic || msgs[i].Feed != f.name {
						t.Errorf("feed %s: decision %q for message %q of feed %q", f.name, d.ID, msgs[i].Topic, msgs[i].Feed)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, f := range procs {
		if deliveries, first, _ := f.Counts(); first != deliveries || deliveries != countRounds(300) {
			t.Errorf("feed %s counted %d deliveries, %d first", f.name, deliveries, first)
		}
	}
	if p.combined.Load() == 0 {
		t.Logf("no call combined two feeds' batches in %d calls (the scheduler never made them wait)", p.calls.Load())
	}

	p.fail.Store(true)
	var failed atomic.Int64
	for _, f := range procs {
		wg.Go(func() {
			if _, err := f.Process(context.Background(), []engine.Message{{Topic: f.name}}); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 3 {
		t.Fatalf("%d of 3 batches failed with the store down", failed.Load())
	}
}

// countRounds is how many messages a feed sends over rounds rounds of
// 1+round%7 messages.
func countRounds(rounds int) uint64 {
	n := 0
	for r := range rounds {
		n += 1 + r%7
	}
	return uint64(n)
}

// gated is echo whose calls wait for a gate to open.
type gated struct {
	echo
	gate chan struct{}
}

func (g *gated) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	<-g.gate
	return g.echo.Process(ctx, msgs)
}

// The batches that arrive while a call commits are committed together in
// the next call, in the order they came, each getting its own decisions.
func TestWaitingBatchesAreCombined(t *testing.T) {
	g := &gated{echo: echo{t: t}, gate: make(chan struct{})}
	procs := FeedProcessors(g, []string{"a", "b", "c"}, nil, nil)
	one := procs[0].one
	results := make([][]engine.Decision, 3)
	var wg sync.WaitGroup
	call := func(i int) {
		wg.Go(func() {
			ds, err := procs[i].Process(context.Background(), []engine.Message{{Topic: fmt.Sprint(i, "-1")}, {Topic: fmt.Sprint(i, "-2")}})
			if err != nil {
				t.Error(err)
			}
			results[i] = ds
		})
	}
	call(0)
	waitFor(t, func() bool { one.mu.Lock(); defer one.mu.Unlock(); return one.busy && len(one.queue) == 0 }) // a's call commits
	call(1)
	call(2)
	waitFor(t, func() bool { one.mu.Lock(); defer one.mu.Unlock(); return len(one.queue) == 2 }) // b and c wait
	close(g.gate)
	wg.Wait()
	if calls, combined := g.calls.Load(), g.combined.Load(); calls != 2 || combined != 1 {
		t.Fatalf("%d calls, %d combining feeds; want a's alone, then b's and c's in one", calls, combined)
	}
	for i, ds := range results {
		if len(ds) != 2 || ds[0].ID != fmt.Sprint(i, "-1") || ds[1].ID != fmt.Sprint(i, "-2") {
			t.Errorf("feed %d got %+v", i, ds)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 5000 {
		if cond() {
			return
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the condition never held")
}

// window decides a message applied the first time its topic comes, and
// duplicate after, keyed by the topic.
type window struct{ seen map[string]bool }

func (w *window) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	ds := make([]engine.Decision, len(msgs))
	for i, m := range msgs {
		ds[i] = engine.Decision{Outcome: engine.Applied, Key: sha256.Sum256([]byte(m.Topic))}
		if w.seen[m.Topic] {
			ds[i].Outcome = engine.Duplicate
		}
		w.seen[m.Topic] = true
	}
	return ds, nil
}

// A twin is timed against the other feed's copy: the feed that trails
// says by how much; a replay on the feed that came first is no twin.
func TestATwinIsTimedAgainstTheOtherFeedsCopy(t *testing.T) {
	var told []string
	procs := FeedProcessors(&window{seen: map[string]bool{}}, []string{"a", "b"}, func(feed string, d time.Duration) {
		told = append(told, fmt.Sprintf("%s %v", feed, d > 0))
	}, nil)
	a, b := procs[0], procs[1]
	msg := func(topic string) []engine.Message { return []engine.Message{{Topic: topic}} }
	if _, err := a.Process(context.Background(), msg("m1")); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for time.Since(before) < 2*time.Millisecond { // b's copy comes measurably later
		runtime.Gosched()
	}
	b.Process(context.Background(), msg("m1"))
	a.Process(context.Background(), msg("m1")) // a replay on a: no twin of b's
	if b.Behind() < 2*time.Millisecond || a.Behind() != 0 {
		t.Fatalf("behind: a %v, b %v; want b at least 2ms behind, a not", a.Behind(), b.Behind())
	}
	if fmt.Sprint(told) != "[b true]" {
		t.Fatalf("told %v", told)
	}
}

// forgetful decides every message applied: a key window whose keys have
// all left it.
type forgetful struct{}

func (forgetful) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	ds := make([]engine.Decision, len(msgs))
	for i, m := range msgs {
		ds[i] = engine.Decision{Outcome: engine.Applied, Key: sha256.Sum256([]byte(m.Topic))}
	}
	return ds, nil
}

// A twin applied (its key had left the key window) is counted as applied
// again on the feed that delivered it, timed against the other feed's
// copy, and told with the feed that came first; the feed that came first
// counts nothing again.
func TestATwinAppliedAgainIsCountedOnItsFeed(t *testing.T) {
	var told []string
	procs := FeedProcessors(forgetful{}, []string{"a", "b"}, nil, func(feed, first string, d time.Duration) {
		told = append(told, fmt.Sprintf("%s after %s %v", feed, first, d > 0))
	})
	a, b := procs[0], procs[1]
	msg := func(topic string) []engine.Message { return []engine.Message{{Topic: topic}} }
	if _, err := a.Process(context.Background(), msg("m1")); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	for time.Since(before) < 2*time.Millisecond { // b's copy comes measurably later
		runtime.Gosched()
	}
	b.Process(context.Background(), msg("m1"))
	a.Process(context.Background(), msg("m2"))
	a.Process(context.Background(), msg("m1")) // a replay on a, applied a third time: no twin of b's
	if a.AppliedAgain() != 0 || b.AppliedAgain() != 1 || b.Behind() < 2*time.Millisecond || a.Behind() != 0 {
		t.Fatalf("applied again: a %d, b %d (behind: a %v, b %v); want b's twin alone, at least 2ms behind", a.AppliedAgain(), b.AppliedAgain(), a.Behind(), b.Behind())
	}
	if fmt.Sprint(told) != "[b after a true]" {
		t.Fatalf("told %v", told)
	}
}

// fakeSource is a feed's consumer that stops with err (its first fails
// runs only, when fails is set), or is ready and runs until its context
// is done.
type fakeSource struct {
	err   error
	fails int
	runs  atomic.Int32
	ready atomic.Bool
}

func (f *fakeSource) Run(ctx context.Context) error {
	if n := int(f.runs.Add(1)); f.err != nil && (f.fails == 0 || n <= f.fails) {
		return f.err
	}
	f.ready.Store(true)
	<-ctx.Done()
	f.ready.Store(false)
	return nil
}

func (f *fakeSource) Ready() bool { return f.ready.Load() }

func (f *fakeSource) Connected() bool { return f.ready.Load() }

func (f *fakeSource) NotReady() string {
	if f.Ready() {
		return ""
	}
	return "not ready"
}

// connectedSource is a feed's consumer connected to its broker whose
// commits fail (the store is down): connected, not ready.
type connectedSource struct{ fakeSource }

func (*connectedSource) Ready() bool     { return false }
func (*connectedSource) Connected() bool { return true }

// A feed's status says connected while its broker connection is up, as
// replayguard_feed_connected does, though the store refusing commits
// holds it back: the dashboard showed every path DOWN during a store
// outage, pointing at the brokers.
func TestAFeedConnectedWhileTheStoreIsDownIsShownConnected(t *testing.T) {
	procs := FeedProcessors(&failingProc{}, []string{"a", "b"}, nil, nil)
	s := &feedsSource{log: discardLogger(), one: procs[0].one, feeds: []*feedSource{
		{name: "a", src: &connectedSource{}, proc: procs[0]},
		{name: "b", src: &fakeSource{}, proc: procs[1]},
	}}
	st := s.Status()
	if len(st) != 2 || !st[0].Connected || st[1].Connected {
		t.Fatalf("status %+v: want a connected (its broker is up, its commits fail) and b down", st)
	}
}

// A feed that stops (its broker refused the subscription) leaves the
// others running, ready, with a warning that says why.
func TestAFeedThatStopsLeavesTheOthersRunning(t *testing.T) {
	good := &fakeSource{}
	s := &feedsSource{log: discardLogger(), retryMin: time.Hour, feeds: []*feedSource{
		{name: "a", src: &fakeSource{err: errors.New("subscription to incidents/# refused: not authorized")}},
		{name: "b", src: good},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, func() bool { return s.feeds[0].failed.Load() != nil && good.Ready() })
	select {
	case err := <-done:
		t.Fatalf("Run returned while feed b runs: %v", err)
	default:
	}
	if !s.Ready() || s.Warning() != "stopped, tried again shortly: feed a: subscription to incidents/# refused: not authorized: consuming from the other path" {
		t.Fatalf("ready %v, warning %q", s.Ready(), s.Warning())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run stopped = %v; want nil (feed a's failure was reported when it came)", err)
	}

	// Every feed stopped: Run returns with their errors.
	s = &feedsSource{log: discardLogger(), feeds: []*feedSource{
		{name: "a", src: &fakeSource{err: errors.New("refused")}}, {name: "b", src: &fakeSource{err: errors.New("refused too")}}}}
	if err := s.Run(context.Background()); err == nil || err.Error() != "feed a: refused\nfeed b: refused too" {
		t.Fatalf("Run with every feed stopped = %v", err)
	}
}

// TestAFeedThatStoppedIsTriedAgain: a feed whose address closed each
// connection at once (no version could be negotiated) is run again after
// a pause, and serves once its broker is back; the consumer is not left on
// one path until run restarts.
func TestAFeedThatStoppedIsTriedAgain(t *testing.T) {
	back := &fakeSource{err: errors.New("no broker accepts the MQTT protocol"), fails: 3}
	s := &feedsSource{log: discardLogger(), retryMin: time.Millisecond, retryMax: 4 * time.Millisecond, feeds: []*feedSource{
		{name: "a", src: &fakeSource{}}, {name: "b", src: back}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, func() bool { return back.Ready() })
	if n := back.runs.Load(); n != 4 || s.feeds[1].failed.Load() != nil || s.Warning() != "" {
		t.Fatalf("feed b ran %d times, failed %v, warning %q; want it serving at its fourth run", n, s.feeds[1].failed.Load(), s.Warning())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A key remembered again keeps its newer arrival when its older place in
// the ring is reused.
func TestArrivalsKeepAKeyAddedAgain(t *testing.T) {
	a := newArrivals(2)
	k1, k2 := engine.Hash{1}, engine.Hash{2}
	t0 := time.Unix(100, 0)
	a.add(k1, arrival{at: t0})
	a.add(k1, arrival{at: t0.Add(time.Second)}) // applied again (its window entry expired)
	a.add(k2, arrival{at: t0})                  // reuses k1's first place
	if x, ok := a.at[k1]; !ok || !x.at.Equal(t0.Add(time.Second)) {
		t.Fatalf("k1 %+v, %v; want its second arrival kept", x, ok)
	}
}

// failingProc fails every call while fail is set.
type failingProc struct{ fail atomic.Bool }

func (f *failingProc) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	if f.fail.Load() {
		return nil, errors.New("store not writable")
	}
	return make([]engine.Decision, len(msgs)), nil
}

// TestFeedsAreNotReadyWhileCommitsFail: a commit is the engine's, whichever
// feed's batch it carried; feed b having nothing to commit meanwhile does
// not make the consumer ready while feed a's commits fail.
func TestFeedsAreNotReadyWhileCommitsFail(t *testing.T) {
	p := &failingProc{}
	procs := FeedProcessors(p, []string{"a", "b"}, nil, nil)
	a, b := &fakeSource{}, &fakeSource{}
	a.ready.Store(true)
	b.ready.Store(true)
	s := &feedsSource{log: discardLogger(), one: procs[0].one, feeds: []*feedSource{{name: "a", src: a, proc: procs[0]}, {name: "b", src: b, proc: procs[1]}}}
	p.fail.Store(true)
	if _, err := procs[0].Process(context.Background(), []engine.Message{{Topic: "t"}}); err == nil {
		t.Fatal("the failing commit returned no error")
	}
	a.ready.Store(false) // its consumer's last commit failed
	if s.Ready() || s.Warning() != "commits are failing, the deliveries wait unacknowledged: store not writable" {
		t.Fatalf("while commits fail: ready %v, warning %q", s.Ready(), s.Warning())
	}
	p.fail.Store(false)
	if _, err := procs[0].Process(context.Background(), []engine.Message{{Topic: "t"}}); err != nil {
		t.Fatal(err)
	}
	a.ready.Store(true)
	if !s.Ready() || s.Warning() != "" {
		t.Fatalf("once a commit succeeded: ready %v, warning %q", s.Ready(), s.Warning())
	}

	// Every feed down, one of them stopped for good: not ready, and the
	// warning still says which stopped and why.
	a.ready.Store(false)
	b.ready.Store(false)
	err := errors.New("feed b: subscription refused")
	s.feeds[1].failed.Store(&err)
	if s.Ready() || s.Warning() != "stopped, tried again shortly: feed b: subscription refused" {
		t.Fatalf("every feed down: ready %v, warning %q", s.Ready(), s.Warning())
	}
}

// With feeds, the consumers take each feed's password and TLS settings:
// mqtt's own are read only through the feeds that leave theirs unset, so a
// password variable only mqtt names, unset here, fails nothing.
func TestFeedsReadTheirOwnSecrets(t *testing.T) {
	t.Setenv("RG_FEED_PASS", "s3cret")
	cfg, err := config.Parse([]byte(`mqtt:
  client_id: rg
  password_env: RG_UNSET_PASS
  feeds:
    - {name: a, brokers: [tcp://127.0.0.1:1], password_env: RG_FEED_PASS}
    - {name: b, brokers: [tcp://127.0.0.1:2], password_env: RG_FEED_PASS}
routes:
  - {name: meters, topic: plant/+/energy, source: ["topic[1]"], id: msgId}
`), "rg.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newFeedsSource(cfg, discardLogger(), metrics.New(prometheus.NewRegistry(), "test", "test"), &failingProc{}, shareMembership{}, nil)
	if err != nil || len(s.feeds) != 2 {
		t.Fatalf("newFeedsSource = %v, %v", s, err)
	}
}

// submitWindow is a window with SubmitLanded: it decides a batch at once, and
// its wait returns when the test lands it, with the error the test gives.
type submitWindow struct {
	window
	mu      sync.Mutex
	flights []chan error
}

func (w *submitWindow) SubmitLanded(ctx context.Context, msgs []engine.Message) (<-chan struct{}, func() ([]engine.Decision, error), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ds, _ := w.window.Process(ctx, msgs)
	land, landed := make(chan error, 1), make(chan struct{})
	w.flights = append(w.flights, land)
	var err error
	go func() {
		err = <-land
		close(landed)
	}()
	return landed, func() ([]engine.Decision, error) {
		if <-landed; err != nil {
			return nil, err
		}
		return ds, nil
	}, nil
}

// land lands the i-th batch submitted, with err.
func (w *submitWindow) land(i int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flights[i] <- err
}

// A feed's consumer submits its batches where the processor has Submit
// and the store is a single owner's; on a shared store, which commits
// inside Submit, and where the processor has none, the feeds' batches are
// combined into one call instead.
func TestFeedsSubmitOnlyWhereTheEngineCommitsBehind(t *testing.T) {
	sub := FeedProcessors(&submitWindow{window: window{seen: map[string]bool{}}}, []string{"a"}, nil, nil)[0]
	if _, ok := feedProcessor(sub, false).(*SubmittingFeed); !ok {
		t.Error("single-owner store: the feed's processor has no Submit")
	}
	if _, ok := feedProcessor(sub, true).(*SubmittingFeed); ok {
		t.Error("shared store: the feed's processor has Submit")
	}
	plain := FeedProcessors(&window{seen: map[string]bool{}}, []string{"a"}, nil, nil)[0]
	if plain.Submitting() != nil {
		t.Error("a processor without Submit gave a feed Submit")
	}
	if _, ok := feedProcessor(plain, false).(*SubmittingFeed); ok {
		t.Error("a processor without Submit: the feed's processor has Submit")
	}
}

// Submitted batches are counted once they land, and their twins timed in
// the order the engine decided them, whichever wait returns first: the
// twin on b, decided after a's copy, lands first and is still timed
// against it. A batch that failed counts nothing, and makes the feeds not
// ready until a commit lands.
func TestSubmittedFeedBatchesAreCountedAndTimedInOrder(t *testing.T) {
	w := &submitWindow{window: window{seen: map[string]bool{}}}
	var told []string
	procs := FeedProcessors(w, []string{"a", "b"}, func(feed string, d time.Duration) {
		told = append(told, fmt.Sprintf("%s %v", feed, d > 0))
	}, nil)
	a, b := procs[0].Submitting(), procs[1].Submitting()
	src := &fakeSource{}
	src.ready.Store(true)
	s := &feedsSource{log: discardLogger(), one: procs[0].one, feeds: []*feedSource{{name: "a", src: src, proc: procs[0]}}}
	msgs := func(topics ...string) []engine.Message {
		out := make([]engine.Message, len(topics))
		for i, tp := range topics {
			out[i] = engine.Message{Topic: tp}
		}
		return out
	}
	ctx := context.Background()
	first := msgs("m1", "m2")
	_, waitA, err := a.SubmitLanded(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if first[0].Feed != "a" {
		t.Fatalf("a submitted message's feed is %q", first[0].Feed)
	}
	before := time.Now()
	for time.Since(before) < 2*time.Millisecond { // b's copy comes measurably later
		runtime.Gosched()
	}
	_, waitB, err := b.SubmitLanded(ctx, msgs("m1"))
	if err != nil {
		t.Fatal(err)
	}
	w.land(1, nil)
	ds, err := waitB()
	if err != nil || len(ds) != 1 || ds[0].Outcome != engine.Duplicate {
		t.Fatalf("b's twin: %v, %v", ds, err)
	}
	if d, f, dup := procs[1].Counts(); d != 1 || f != 0 || dup != 1 {
		t.Fatalf("b's counts %d, %d, %d; want 1 delivery, a duplicate", d, f, dup)
	}
	if len(told) != 0 {
		t.Fatalf("timed before a's copy landed: %v", told)
	}
	w.land(0, nil)
	if _, err := waitA(); err != nil {
		t.Fatal(err)
	}
	if d, f, dup := procs[0].Counts(); d != 2 || f != 2 || dup != 0 {
		t.Fatalf("a's counts %d, %d, %d; want 2 deliveries, both first", d, f, dup)
	}
	if fmt.Sprint(told) != "[b true]" || procs[1].Behind() < 2*time.Millisecond || procs[0].Behind() != 0 {
		t.Fatalf("told %v, behind a %v, b %v; want b at least 2ms behind", told, procs[0].Behind(), procs[1].Behind())
	}

	_, waitA, err = a.SubmitLanded(ctx, msgs("m3"))
	if err != nil {
		t.Fatal(err)
	}
	w.land(2, errors.New("store not writable"))
	if _, err := waitA(); err == nil {
		t.Fatal("the failed commit returned no error")
	}
	if d, f, _ := procs[0].Counts(); d != 2 || f != 2 {
		t.Fatalf("a's counts after a failed batch %d, %d; want 2, 2", d, f)
	}
	if s.Ready() || s.Warning() != "commits are failing, the deliveries wait unacknowledged: store not writable" {
		t.Fatalf("after a failed commit: ready %v, warning %q", s.Ready(), s.Warning())
	}
	_, waitA, err = a.SubmitLanded(ctx, msgs("m4"))
	if err != nil {
		t.Fatal(err)
	}
	w.land(3, nil)
	if _, err := waitA(); err != nil {
		t.Fatal(err)
	}
	if d, f, _ := procs[0].Counts(); d != 3 || f != 3 || !s.Ready() {
		t.Fatalf("once a commit landed: a's counts %d, %d, ready %v", d, f, s.Ready())
	}
}

// gatedStore holds each commit until the test opens gate, and fails it
// while fail is set: a store failing under two feeds' batches in flight,
// which a real one cannot be made to do on demand.
type gatedStore struct {
	engine.Store
	gate chan struct{}
	fail atomic.Bool
}

func (g *gatedStore) Commit(ctx context.Context, b *engine.Batch) error {
	<-g.gate
	if g.fail.Load() {
		return errors.New("injected commit failure")
	}
	return g.Store.Commit(ctx, b)
}

// With both feeds' batches in flight on the engine, a commit that fails
// fails the other feed's batch decided on top of it. Each feed commits
// its own again, in whichever order: every message is applied once, its
// twin a duplicate, and the counts are of the commits that landed.
func TestFeedsSubmittedToTheEngineSurviveAFailedCommit(t *testing.T) {
	ctx := context.Background()
	st := &gatedStore{Store: memory.New(), gate: make(chan struct{})}
	e := meterEngine(t, st)
	procs := FeedProcessors(e, []string{"a", "b"}, nil, nil)
	a, b := procs[0].Submitting(), procs[1].Submitting()
	reading := func(id, kwh string) engine.Message {
		return engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":%q,"kwh":%s}`, id, kwh)}
	}
	fromA := []engine.Message{reading("r1", "1.5")}
	fromB := []engine.Message{reading("r1", "1.5"), reading("r2", "0.25")}
	st.fail.Store(true)
	_, waitA, err := a.SubmitLanded(ctx, fromA)
	if err != nil {
		t.Fatal(err)
	}
	_, waitB, err := b.SubmitLanded(ctx, fromB)
	if err != nil {
		t.Fatal(err)
	}
	close(st.gate) // both commits go through the gate; the first fails
	if _, err := waitA(); err == nil {
		t.Fatal("a's failed commit returned no error")
	}
	if _, err := waitB(); err == nil {
		t.Fatal("b's batch, decided on top of a's failed one, returned no error")
	}
	st.fail.Store(false)
	ds, err := procs[1].Process(ctx, fromB) // b's consumer commits again first
	if err != nil || ds[0].Outcome != engine.Applied || ds[1].Outcome != engine.Applied {
		t.Fatalf("b again: %+v, %v", ds, err)
	}
	ds, err = procs[0].Process(ctx, fromA)
	if err != nil || ds[0].Outcome != engine.Duplicate {
		t.Fatalf("a again: %+v, %v", ds, err)
	}
	state := e.State()
	if len(state) != 1 || state[0].Fields.Get("kwh").Num != "1.75" {
		t.Fatalf("state %+v; want meter/m1 at 1.75 kWh", state)
	}
	for i, want := range [][3]uint64{{1, 0, 1}, {2, 2, 0}} {
		if d, f, dup := procs[i].Counts(); [3]uint64{d, f, dup} != want {
			t.Errorf("feed %d counts %d, %d, %d; want %v", i, d, f, dup, want)
		}
	}
}
