package sink_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// chainExporter keeps the (member, position) of every record it is given,
// and refuses them while down.
type chainExporter struct {
	mu   sync.Mutex
	got  map[string][]uint64
	down atomic.Bool
	busy atomic.Int32 // Exports in flight: never more than one
	bad  atomic.Bool  // set when two ran at once
	// refuse names a member whose records the receiver refuses, as it
	// would a batch it cannot take.
	refuse guarded[string]
}

func newChainExporter() *chainExporter { return &chainExporter{got: map[string][]uint64{}} }

func (x *chainExporter) Export(ctx context.Context, recs []engine.AuditRecord) error {
	if x.busy.Add(1) > 1 {
		x.bad.Store(true)
	}
	defer x.busy.Add(-1)
	if x.down.Load() {
		return errors.New("receiver down")
	}
	if m := x.refuse.get(); m != "" && recs[0].Member == m {
		return fmt.Errorf("receiver refuses member %s's records", m)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range recs {
		x.got[r.Member] = append(x.got[r.Member], r.Position)
	}
	return nil
}

func (x *chainExporter) Close(context.Context) error { return nil }

func (x *chainExporter) chain(member string) []uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]uint64(nil), x.got[member]...)
}

// groupRig is a memory group whose members m1, m2 and m3 decide, and a
// sink set on m1's handle.
type groupRig struct {
	g       *memory.Group
	handles map[string]*memory.Member
	engines map[string]*engine.Engine
	set     *sink.Set
	next    int
	cancel  context.CancelFunc
	done    chan struct{}
	logs    *tWriter
}

func newGroupRig(t *testing.T, sinks ...sink.Sink) *groupRig {
	t.Helper()
	r := &groupRig{g: memory.NewGroup(0, 0), handles: map[string]*memory.Member{}, engines: map[string]*engine.Engine{}, logs: &tWriter{t: t}}
	var err error
	for _, id := range []string{"m1", "m2", "m3"} {
		if r.handles[id], err = r.g.Open(id); err != nil {
			t.Fatal(err)
		}
	}
	r.set, err = sink.NewChains(r.handles["m1"], sink.Options{Sinks: sinks, Member: "m1", Batch: 7, Tick: time.Hour,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for id, h := range r.handles {
		var obs engine.Observer
		if id == "m1" {
			obs = r.set
		}
		if r.engines[id], err = engine.New(t.Context(), h, engine.Options{Routes: meters, Observer: obs}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		r.stop()
		for id := range r.handles {
			r.engines[id].Close()
			r.handles[id].Close()
		}
		r.set.Close(context.Background())
	})
	return r
}

func (r *groupRig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() { defer close(r.done); r.set.Run(ctx) }()
}

func (r *groupRig) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

// decide has member decide n fresh readings, 5 to a batch.
func (r *groupRig) decide(t *testing.T, member string, n int) {
	t.Helper()
	for n > 0 {
		msgs := make([]engine.Message, min(n, 5))
		for i := range msgs {
			msgs[i] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d","kwh":0.25}`, r.next)}
			r.next++
		}
		if _, err := r.engines[member].Process(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
		n -= len(msgs)
	}
}

// give hands the set the named members' chains, with their heads.
func (r *groupRig) give(t *testing.T, members ...string) {
	t.Helper()
	chains, err := r.handles["m1"].Chains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var given []engine.Chain
	for _, m := range members {
		c := engine.Chain{Member: m}
		for _, h := range chains {
			if h.Member == m {
				c = h
			}
		}
		given = append(given, c)
	}
	r.set.SetChains(given)
}

// waitCursor waits until sink's cursor on member's chain in the store is pos.
func (r *groupRig) waitCursor(t *testing.T, member, name string, pos uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := r.handles["m1"].ChainCursor(t.Context(), member, name)
		if err != nil {
			t.Fatal(err)
		}
		if c == pos {
			return
		}
		if c > pos || time.Now().After(deadline) {
			t.Fatalf("cursor of sink %s on %s's chain is %d, want %d", name, member, c, pos)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestSinksDeliverEveryChainGivenInOrderWithACursorPerChain(t *testing.T) {
	a, b := newChainExporter(), newChainExporter()
	r := newGroupRig(t, sink.Sink{Name: "a", Exporter: a}, sink.Sink{Name: "b", Exporter: b})
	r.decide(t, "m2", 40)
	r.decide(t, "m3", 30)
	r.give(t, "m1", "m2")
	r.start()
	r.decide(t, "m1", 25) // the own chain: woken by each commit
	for _, name := range []string{"a", "b"} {
		r.waitCursor(t, "m1", name, 25)
		r.waitCursor(t, "m2", name, 40)
	}
	for _, x := range []*chainExporter{a, b} {
		checkReceived(t, x.chain("m1"), 25)
		checkReceived(t, x.chain("m2"), 40)
		if got := x.chain("m3"); len(got) != 0 {
			t.Fatalf("m3's chain, never given, was delivered: %v", got)
		}
		if x.bad.Load() {
			t.Fatal("an exporter was called from two goroutines at once")
		}
	}
	if c, _ := r.handles["m2"].ChainCursor(t.Context(), "m3", "a"); c != 0 {
		t.Fatalf("a cursor on m3's chain: %d", c)
	}
	st := r.set.Status()
	if len(st) != 2 || st[0].Name != "a" || st[0].Cursor != 25 || st[0].Backlog != 0 || st[0].Delivered != 65 {
		t.Fatalf("status %+v; want sink a at 25 on m1's chain, nothing behind, 65 delivered", st)
	}

	t.Run("a chain given later is delivered from the cursor the store keeps", func(t *testing.T) {
		// Another process delivered m3's chain up to 12 for sink a and stopped.
		if err := r.handles["m3"].SetChainCursor(t.Context(), "m3", "a", 12); err != nil {
			t.Fatal(err)
		}
		r.give(t, "m1", "m2", "m3")
		r.waitCursor(t, "m3", "a", 30)
		r.waitCursor(t, "m3", "b", 30)
		if got := a.chain("m3"); len(got) != 18 || got[0] != 13 {
			t.Fatalf("sink a got m3's positions %v; want 13..30", got)
		}
		checkReceived(t, b.chain("m3"), 30)
	})

	t.Run("a chain taken away stops; given again, it resumes from the store", func(t *testing.T) {
		r.give(t, "m1", "m3")
		r.decide(t, "m2", 10)
		r.decide(t, "m1", 5) // wakes the sinks: m2's chain is not theirs now
		r.waitCursor(t, "m1", "a", 30)
		if got := a.chain("m2"); len(got) != 40 {
			t.Fatalf("m2's chain was delivered after it was taken away: %d records", len(got))
		}
		// Meanwhile another process delivered m2's chain for sink a up to 45.
		r.handles["m2"].SetChainCursor(t.Context(), "m2", "a", 45)
		r.give(t, "m1", "m2", "m3")
		r.waitCursor(t, "m2", "a", 50)
		r.waitCursor(t, "m2", "b", 50)
		if got := a.chain("m2"); len(got) != 45 || got[40] != 46 {
			t.Fatalf("sink a's m2 positions %v; want 1..40 then 46..50", got)
		}
		checkReceived(t, b.chain("m2"), 50)
	})

	t.Run("the floor of a chain is its lowest cursor over the sinks", func(t *testing.T) {
		r.handles["m1"].SetChainCursor(t.Context(), "m3", "a", 35) // a cursor only moves forward
		for member, want := range map[string]uint64{"m1": 30, "m2": 50, "m3": 30} {
			if f, err := r.set.Floor(t.Context(), member); err != nil || f != want {
				t.Errorf("Floor(%s) = %d, %v; want %d", member, f, err, want)
			}
		}
	})
}

func TestSinksBackOffOnAFailingChainAndLoseNothing(t *testing.T) {
	x := newChainExporter()
	r := newGroupRig(t, sink.Sink{Name: "x", Exporter: x})
	r.decide(t, "m2", 30)
	r.give(t, "m1", "m2")
	r.start()
	r.waitCursor(t, "m2", "x", 30)
	x.down.Store(true)
	r.decide(t, "m1", 20)
	r.decide(t, "m2", 20)
	r.give(t, "m1", "m2") // the heads as the store keeps them
	deadline := time.Now().Add(5 * time.Second)
	for r.set.Status()[0].Failures < 3 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	if st := r.set.Status()[0]; st.Failures < 3 || st.Backlog != 40 {
		t.Fatalf("status while down: %+v; want failures and a backlog of 40 over both chains", st)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "sink=x member=") {
		t.Fatalf("no failure logged naming the sink and the chain:\n%s", logs)
	}
	x.down.Store(false)
	r.waitCursor(t, "m1", "x", 20)
	r.waitCursor(t, "m2", "x", 50)
	checkReceived(t, x.chain("m1"), 20)
	checkReceived(t, x.chain("m2"), 50)
}

func TestAChainThatFailsHoldsUpNoOtherChain(t *testing.T) {
	x := newChainExporter()
	x.refuse.set("m1")
	r := newGroupRig(t, sink.Sink{Name: "x", Exporter: x})
	r.decide(t, "m1", 10)
	r.decide(t, "m2", 30)
	r.give(t, "m1", "m2")
	r.start()
	r.waitCursor(t, "m2", "x", 30)
	checkReceived(t, x.chain("m2"), 30)
	if logs := r.logs.String(); !strings.Contains(logs, "sink=x member=m1") {
		t.Fatalf("the failing chain was not logged:\n%s", logs)
	}
	if st := r.set.Status()[0]; st.Failures == 0 || st.Backlog != 10 {
		t.Fatalf("status: %+v; want failures and m1's 10 records behind", st)
	}
	x.refuse.set("")
	r.decide(t, "m1", 1) // wakes the sink
	r.waitCursor(t, "m1", "x", 11)
	checkReceived(t, x.chain("m1"), 11)
}

func TestFlushDeliversEveryChainGivenOrSaysWhichIsBehind(t *testing.T) {
	x := newChainExporter()
	r := newGroupRig(t, sink.Sink{Name: "x", Exporter: x})
	r.decide(t, "m1", 9)
	r.decide(t, "m2", 23)
	r.give(t, "m1", "m2")
	if err := r.set.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkReceived(t, x.chain("m1"), 9)
	checkReceived(t, x.chain("m2"), 23)

	x.down.Store(true)
	r.decide(t, "m2", 5)
	r.give(t, "m1", "m2")
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := r.set.Flush(ctx)
	if !errors.Is(err, sink.ErrUndelivered) || !strings.Contains(err.Error(), "sink x delivered member m2's chain up to 23 of 28") {
		t.Fatalf("Flush with the receiver down = %v", err)
	}
}

func TestNewRefusesAMemberAndNewChainsDeliversNothingUntilGiven(t *testing.T) {
	if _, err := sink.New(memory.New(), sink.Options{Member: "m1"}); err == nil {
		t.Fatal("New with a member: no error")
	}
	x := newChainExporter()
	r := newGroupRig(t, sink.Sink{Name: "x", Exporter: x})
	r.decide(t, "m1", 10)
	if err := r.set.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := x.chain("m1"); len(got) != 0 {
		t.Fatalf("a chain never given was delivered: %v", got)
	}
	if st := r.set.Status()[0]; st.Backlog != 0 || st.Cursor != 0 {
		t.Fatalf("status with no chain given: %+v", st)
	}
}

// gatedExporter passes records to a receiver, but holds its first batch
// of member's chain until open is closed, as a slow receiver would, or
// until its context ends (then the batch never reaches the receiver).
type gatedExporter struct {
	recv    *chainExporter
	member  string
	entered chan struct{} // closed when the held batch is in hand
	open    chan struct{}
	held    atomic.Bool
}

func (x *gatedExporter) Export(ctx context.Context, recs []engine.AuditRecord) error {
	if recs[0].Member == x.member && !x.held.Swap(true) {
		close(x.entered)
		select {
		case <-x.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return x.recv.Export(ctx, recs)
}

func (x *gatedExporter) Close(context.Context) error { return nil }

// followsChain reports where got, the positions of one chain in the
// order a receiver got them, does not follow the chain: every record
// comes right after the one before it in the chain, or repeats from an
// earlier one (a batch sent again); "" when it follows it.
func followsChain(got []uint64) string {
	for i := 1; i < len(got); i++ {
		if got[i] > got[i-1]+1 {
			return fmt.Sprintf("position %d (index %d) came right after %d", got[i], i, got[i-1])
		}
	}
	return ""
}

// TestAChainTakenAwayIsNoLongerExportedOnceSetChainsReturns: a chain taken
// away is released to the process that claims it next, which delivers it
// from the cursor the store keeps, so a batch of it still in hand would
// reach the receiver after newer records: SetChains ends that batch
// before it returns.
func TestAChainTakenAwayIsNoLongerExportedOnceSetChainsReturns(t *testing.T) {
	recv := newChainExporter()
	slow := &gatedExporter{recv: recv, member: "m2", entered: make(chan struct{}), open: make(chan struct{})}
	r := newGroupRig(t, sink.Sink{Name: "x", Exporter: slow})
	r.decide(t, "m2", 20)
	r.give(t, "m1", "m2")
	r.start()
	<-slow.entered // m2's first batch is in hand, its receiver slow

	r.give(t, "m1") // m2 is back: its chain is taken away, then released
	next, err := sink.NewChains(r.handles["m2"], sink.Options{Sinks: []sink.Sink{{Name: "x", Exporter: recv}}, Member: "m2", Batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close(context.Background())
	claim := func() {
		t.Helper()
		chains, err := r.handles["m2"].Chains(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		next.SetChains(chains)
		if err := next.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	claim() // m2's process delivers its chain from the stored cursor
	close(slow.open)
	r.stop()
	r.decide(t, "m2", 7)
	claim()
	got := recv.chain("m2")
	checkReceived(t, got, 27)
	if why := followsChain(got); why != "" {
		t.Fatalf("the receiver got m2's chain out of order, %s: %v", why, got)
	}
}
