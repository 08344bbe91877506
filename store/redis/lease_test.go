package redis

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"reflect"
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

// testChainOfAMemberKilledHereIsClaimedAtOnce: an ingest killed with
// SIGKILL leaves its lease and its chain claim held for their whole ttl
// by a process that no longer exists, under a member id no process takes
// again. The next process on this host (the ingest run again) must claim
// that chain at once, to deliver it to the audit sinks and trim it, rather
// than leave it behind until a later process comes after the lease ran
// out.
func testChainOfAMemberKilledHereIsClaimedAtOnce(t *testing.T, g *group) {
	killed := g.must(t, "killed")
	if err := killed.Commit(t.Context(), batchAfter(t, killed, 3)); err != nil {
		t.Fatal(err)
	}
	if err := killed.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("%s %d deadbeef", strings.Fields(shared.NewHolder())[0], cmd.Process.Pid)
	g.do(t, "SET", g.prefix+"lease:killed", dead, "PX", "600000")
	g.do(t, "SET", g.prefix+"chainclaim:killed", dead, "PX", "600000")
	again := g.must(t, "again")
	got, err := again.ClaimChains(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"again", "killed"}) {
		t.Fatalf("claimed chains %v, want [again killed]: the killed member's holder is a process on this host that has died", got)
	}
	// A holder on another host is never presumed dead.
	g.do(t, "SET", g.prefix+"lease:killed", "elsewhere 1 cafe", "PX", "600000")
	g.do(t, "SET", g.prefix+"chainclaim:killed", "elsewhere 1 cafe", "PX", "600000")
	if got, err := again.ClaimChains(t.Context()); err != nil || !slices.Equal(got, []string{"again"}) {
		t.Fatalf("claimed chains %v, %v while another host's process holds the killed member's lease, want [again]", got, err)
	}
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
	st := a.SharedStats()
	if st.LeaseTTL != 300*time.Millisecond || !st.LeaseExpires.After(time.Now()) {
		t.Fatalf("lease ttl %v, expires %v: want it renewed into the future", st.LeaseTTL, st.LeaseExpires)
	}
	// The server runs on this host: its clock is this one, read between
	// the request and its answer.
	if off := st.ClockOffset.Abs(); st.ClockMeasured.IsZero() || off > st.ClockUncertainty+time.Millisecond {
		t.Fatalf("clock offset %v (±%v) measured at %v: the renewal measured no offset, or not the server's clock", st.ClockOffset, st.ClockUncertainty, st.ClockMeasured)
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
	if v := g.do(t, "GET", g.prefix+"schema"); v != fmt.Sprint(schemaVersion) {
		t.Fatalf("schema %v", v)
	}
	nums := g.do(t, "HVALS", g.prefix+"members").([]any)
	slices.SortFunc(nums, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	if fmt.Sprint(nums) != "[1 2 3 4]" {
		t.Fatalf("member numbers %v", nums)
	}
}

func testSchemaNewer(t *testing.T, g *group) {
	g.do(t, "SET", g.prefix+"schema", fmt.Sprint(schemaVersion+1))
	_, err := g.open(t, "a")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint("schema version ", schemaVersion+1)) {
		t.Fatalf("open: %v", err)
	}
}

// testSchemaRaisedUpward runs the raise a member makes after it read an
// older version: from 3 it writes this build's, but where a newer build's
// member wrote a higher one since the read, that one stays and is returned.
func testSchemaRaisedUpward(t *testing.T, g *group) {
	s := g.must(t, "a")
	for _, c := range []struct{ stored, want string }{{"3", fmt.Sprint(schemaVersion)}, {fmt.Sprint(schemaVersion + 1), fmt.Sprint(schemaVersion + 1)}} {
		g.do(t, "SET", g.prefix+"schema", c.stored)
		now, err := raiseSchemaScript.Run(t.Context(), s.c, []string{s.k.schema}, schemaVersion).Int()
		if err != nil || fmt.Sprint(now) != c.want {
			t.Fatalf("raise over %s: %d, %v; want %s", c.stored, now, err, c.want)
		}
		if v := g.do(t, "GET", g.prefix+"schema"); v != c.want {
			t.Fatalf("raise over %s left %v, want %s", c.stored, v, c.want)
		}
	}
}

// testSchemaNotRaisedUnderARunningMember leaves keys of version 1 with a
// member of that build holding its lease: a member of this build refuses
// to raise the version, naming that member and what to do, and leaves it
// at 1 for the running member; once that lease is given up, the version is
// raised.
func testSchemaNotRaisedUnderARunningMember(t *testing.T, g *group) {
	g.do(t, "SET", g.prefix+"schema", "1")
	g.do(t, "HSET", g.prefix+"members", "old-1", "1", "old-2", "2")
	g.do(t, "SET", g.prefix+"lease:old-1", "otherhost 4242 cafe", "PX", "3600000")
	_, err := g.open(t, "a")
	if !errors.Is(err, ErrMembersRunning) {
		t.Fatalf("open under a running member of version 1 = %v, want ErrMembersRunning", err)
	}
	for _, want := range []string{"schema version 1", `member "old-1"`, "stop every member"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "old-2") {
		t.Errorf("error %q names a member that holds no lease", err)
	}
	if v := g.do(t, "GET", g.prefix+"schema"); v != "1" {
		t.Fatalf("schema %v after a refused open, want 1", v)
	}
	g.do(t, "DEL", g.prefix+"lease:old-1")
	g.must(t, "a")
	if v := g.do(t, "GET", g.prefix+"schema"); v != fmt.Sprint(schemaVersion) {
		t.Fatalf("schema %v once the member stopped, want %d", v, schemaVersion)
	}
}

// testSchemaJSONRows writes a source's and an entity's rows as version 1
// held them (JSON) and checks that a member raises the version, reads them
// on Load and in Update, and writes them back binary.
func testSchemaJSONRows(t *testing.T, g *group) {
	src := engine.SourceState{Route: "incidents", Source: []string{"fd", "e1"},
		Epochs: []engine.EpochWindow{{Epoch: "1", Numeric: true, Value: 1, High: 7, Bitmap: []uint64{0xff}}}}
	ent := engine.EntityState{Name: "incident/7", Fields: engine.Fields{
		{Name: "casualties", FieldValue: engine.FieldValue{Kind: engine.KindNumber, Num: "3", Version: engine.Version{Epoch: 1, Sequence: 7, Ordinal: 7}}}}}
	sj, _ := json.Marshal(&src)
	ej, _ := json.Marshal(&ent)
	g.do(t, "SET", g.prefix+"schema", "1")
	g.do(t, "HSET", g.prefix+"source", src.ID(), string(sj))
	g.do(t, "HSET", g.prefix+"source:version", src.ID(), "1")
	g.do(t, "HSET", g.prefix+"entity", ent.Name, string(ej))
	g.do(t, "HSET", g.prefix+"entity:version", ent.Name, "1")

	ro := g.must(t, "")
	if v := g.do(t, "GET", g.prefix+"schema"); v != "1" {
		t.Fatalf("a read-only handle wrote schema %v", v)
	}
	if snap, err := ro.Load(t.Context()); err != nil || len(snap.Sources) != 1 || !reflect.DeepEqual(snap.Sources[0], src) {
		t.Fatalf("read-only Load of JSON rows = %+v, %v", snap, err)
	}
	s := g.must(t, "a")
	if v := g.do(t, "GET", g.prefix+"schema"); v != fmt.Sprint(schemaVersion) {
		t.Fatalf("schema %v after a member opened, want %d", v, schemaVersion)
	}
	snap, err := s.Load(t.Context())
	if err != nil || len(snap.Sources) != 1 || len(snap.Entities) != 1 ||
		!reflect.DeepEqual(snap.Sources[0], src) || !reflect.DeepEqual(snap.Entities[0], ent) {
		t.Fatalf("Load of JSON rows = %+v, %v; want %+v and %+v", snap, err, src, ent)
	}
	r := &engine.Reads{Sources: []string{src.ID()}, Entities: []string{ent.Name}}
	err = s.Update(t.Context(), r, func(rows *engine.Rows) (*engine.Batch, error) {
		if len(rows.Sources) != 1 || !reflect.DeepEqual(rows.Sources[0], src) || len(rows.Entities) != 1 || !reflect.DeepEqual(rows.Entities[0], ent) {
			t.Errorf("Update read %+v, want the JSON rows", rows)
		}
		next := src
		next.Epochs = []engine.EpochWindow{{Epoch: "1", Numeric: true, Value: 1, High: 8, Bitmap: []uint64{0x1ff}}}
		return &engine.Batch{Sources: []engine.SourceState{next}, Entities: []engine.EntityState{ent}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range [][3]string{{"source", src.ID(), "\x03"}, {"entity", ent.Name, "\x04"}} {
		if v, _ := g.do(t, "HGET", g.prefix+k[0], k[1]).(string); v == "" || v[:1] != k[2] {
			t.Errorf("%s row after the write starts %q, want the binary format", k[0], v[:min(len(v), 8)])
		}
	}
	if snap, err := s.Load(t.Context()); err != nil || snap.Sources[0].Epochs[0].High != 8 || !reflect.DeepEqual(snap.Entities[0], ent) {
		t.Fatalf("Load of the rows written binary = %+v, %v", snap, err)
	}
}

// testLeaseLostDuringABatch: a batch is decided for longer than the
// member's lease while the lease is not renewed (the process stalls), and
// a second process of the member takes the lease meanwhile. The update
// script checks the lease with its writes: the late batch writes nothing,
// and the chain goes on from the new process's commits alone.
func testLeaseLostDuringABatch(t *testing.T, g *group) {
	short := func(o *Options) { o.LeaseTTL = 300 * time.Millisecond }
	a := g.must(t, "a", short)
	var b *Store
	_, err := update(t.Context(), a, &engine.Reads{Keys: []engine.Hash{hashOf("k")}}, func(*engine.Rows) (*engine.Batch, error) {
		if b == nil {
			stall(a)
			deadline := time.Now().Add(5 * time.Second)
			for {
				s, err := g.open(t, "a", short)
				if err == nil {
					b = s
					break
				}
				if !errors.Is(err, engine.ErrMemberHeld) || time.Now().After(deadline) {
					t.Fatalf("open member a again once its lease expired: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		return batchAfter(t, a, 1), nil
	})
	wantErr(t, err, engine.ErrMemberHeld)
	if !strings.Contains(err.Error(), b.holder) {
		t.Fatalf("error %q does not name the new holder %q", err, b.holder)
	}
	if err := b.Commit(t.Context(), batchAfter(t, b, 1)); err != nil {
		t.Fatalf("the new process's batch: %v", err)
	}
	wantErr(t, a.Commit(t.Context(), batchAfter(t, a, 1)), engine.ErrMemberHeld)
	if recs := chainOf(t, b, "a"); len(recs) != 1 || recs[0].Prev != (engine.Hash{}) {
		t.Fatalf("member a's chain holds %d records, want the new process's one", len(recs))
	}
}
