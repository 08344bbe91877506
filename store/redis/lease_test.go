package redis

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/internal/shared"
)

func testLeaseHeld(t *testing.T, g *group) {
	a := g.must(t, "a")
	_, err := g.open(t, "a")
	wantErr(t, err, engine.ErrMemberHeld)
	if !strings.Contains(err.Error(), a.holder) || !strings.Contains(err.Error(), "until") {
		t.Fatalf("error %q does not name the holder %q and when the lease ends", err, a.holder)
	}
	base := a.QuarantineBase()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	again := g.must(t, "a")
	if again.QuarantineBase() != base {
		t.Fatalf("member number changed: %x, was %x", again.QuarantineBase(), base)
	}
}

func testLeaseDeadHolder(t *testing.T, g *group) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host := strings.Fields(shared.NewHolder())[0]
	dead := fmt.Sprintf("%s %d deadbeef", host, cmd.Process.Pid)
	g.do(t, "SET", g.prefix+"lease:a", dead, "PX", "600000")
	a := g.must(t, "a")
	if v := g.do(t, "GET", g.prefix+"lease:a"); v != a.holder {
		t.Fatalf("lease held by %q, want %q", v, a.holder)
	}
	// A holder on another host is never presumed dead.
	g.do(t, "SET", g.prefix+"lease:b", fmt.Sprintf("elsewhere %d deadbeef", cmd.Process.Pid), "PX", "600000")
	_, err := g.open(t, "b")
	wantErr(t, err, engine.ErrMemberHeld)
}

func testFenced(t *testing.T, g *group) {
	a := g.must(t, "a")
	g.do(t, "SET", g.prefix+"lease:a", "thief 1 cafe", "PX", "600000")
	_, err := update(t.Context(), a, &engine.Reads{}, func(*engine.Rows) (*engine.Batch, error) { return batchAfter(t, a, 1), nil })
	wantErr(t, err, engine.ErrMemberHeld)
	if !strings.Contains(err.Error(), "thief") {
		t.Fatalf("error %q does not name the holder", err)
	}
	wantErr(t, a.Commit(t.Context(), batchAfter(t, a, 1)), engine.ErrMemberHeld)
	if h, _ := a.Head(t.Context()); h.Position != 0 {
		t.Fatal("a fenced handle wrote")
	}
}

func testLeaseExpired(t *testing.T, g *group) {
	a := g.must(t, "a")
	g.do(t, "DEL", g.prefix+"lease:a")
	if err := a.Commit(t.Context(), batchAfter(t, a, 1)); err != nil {
		t.Fatal(err)
	}
	if v := g.do(t, "GET", g.prefix+"lease:a"); v != a.holder {
		t.Fatalf("lease held by %v", v)
	}
}

func testLeaseRenewed(t *testing.T, g *group) {
	short := func(o *Options) { o.LeaseTTL = 300 * time.Millisecond }
	a := g.must(t, "a", short)
	time.Sleep(1 * time.Second) // three lease lifetimes
	_, err := g.open(t, "a", short)
	wantErr(t, err, engine.ErrMemberHeld)
	if st := a.SharedStats(); st.LeaseTTL != 300*time.Millisecond || !st.LeaseExpires.After(time.Now()) {
		t.Fatalf("lease ttl %v, expires %v: want it renewed into the future", st.LeaseTTL, st.LeaseExpires)
	}
}

func testSchemaConcurrent(t *testing.T, g *group) {
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = g.open(t, fmt.Sprint("m", i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	if v := g.do(t, "GET", g.prefix+"schema"); v != "1" {
		t.Fatalf("schema %v", v)
	}
	nums := g.do(t, "HVALS", g.prefix+"members").([]any)
	slices.SortFunc(nums, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	if fmt.Sprint(nums) != "[1 2 3 4]" {
		t.Fatalf("member numbers %v", nums)
	}
}

func testSchemaNewer(t *testing.T, g *group) {
	g.do(t, "SET", g.prefix+"schema", "2")
	_, err := g.open(t, "a")
	if err == nil || !strings.Contains(err.Error(), "schema version 2") {
		t.Fatalf("open: %v", err)
	}
}
