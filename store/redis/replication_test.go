package redis

import (
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestParseReplication(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       replicationInfo
	}{
		{"a primary with a replica", "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=7,state=online\r\n",
			replicationInfo{"master", 1}},
		{"a replica", "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nconnected_slaves:0\r\n", replicationInfo{"slave", 0}},
		{"a Sentinel, which has no replication section", "", replicationInfo{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := parseReplication(c.text); got != c.want {
				t.Fatalf("parsed %+v, want %+v", got, c.want)
			}
		})
	}
}

// replicated is a primary with one replica and a group on it, which the
// steps of TestReplication share, in order.
type replicated struct {
	srv, rep *testbroker.Redis
	g        *group
}

func TestReplication(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	r := replicated{srv: srv, rep: srv.StartReplica(t), g: newGroup(srv)}
	for _, step := range []struct {
		name string
		fn   func(t *testing.T, r replicated)
	}{
		{"a connected replica with store.wait_replicas 0 is refused", testReplicaRefusedAsync},
		{"a read-only handle opens beside a replica", testReplicaReadOnly},
		{"store.allow_async_replication opens and says so", testReplicaAllowAsync},
		{"store.wait_replicas above the replicas connected is refused", testReplicaTooFew},
		{"a replica's URL is refused", testReplicaURLRefused},
		{"with store.wait_replicas 1 a commit the paused replica did not acknowledge fails", testReplicaUnacknowledged},
		{"a batch the replicas did not acknowledge is decided again, as a duplicate", testReplicaDecidedAgain},
	} {
		t.Run(step.name, func(t *testing.T) { step.fn(t, r) })
	}
}

func testReplicaRefusedAsync(t *testing.T, r replicated) {
	_, err := r.g.open(t, "a")
	if err == nil {
		t.Fatal("opened")
	}
	for _, want := range []string{"1 replica is connected to " + r.srv.URL(), "store.wait_replicas is 0",
		"set store.wait_replicas: 1", "store.allow_async_replication: true"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("open: %v; want an error saying %q", err, want)
		}
	}
	t.Logf("refused: %v", err)
}

func testReplicaReadOnly(t *testing.T, r replicated) {
	r.g.must(t, "")
}

func testReplicaAllowAsync(t *testing.T, r replicated) {
	s := r.g.must(t, "a", func(o *Options) { o.AllowAsyncReplication = true })
	st := s.SharedStats()
	if !strings.Contains(st.AsyncReplication, "1 replica is connected") {
		t.Fatalf("AsyncReplication %q", st.AsyncReplication)
	}
	if err := s.Commit(t.Context(), batchAfter(t, s, 1)); err != nil {
		t.Fatal(err)
	}
}

func testReplicaTooFew(t *testing.T, r replicated) {
	_, err := r.g.open(t, "b", func(o *Options) { o.WaitReplicas = 2 })
	if err == nil || !strings.Contains(err.Error(), "store.wait_replicas is 2 but 1 replica is connected") {
		t.Fatalf("open: %v", err)
	}
}

func testReplicaURLRefused(t *testing.T, r replicated) {
	rg := &group{srv: r.rep, prefix: r.g.prefix}
	_, err := rg.open(t, "c", func(o *Options) { o.WaitReplicas = 1 })
	if err == nil || !strings.Contains(err.Error(), r.rep.URL()+" is a replica") ||
		!strings.Contains(err.Error(), "point store.url at the primary or use Sentinel") {
		t.Fatalf("open: %v", err)
	}
	rg.must(t, "") // a read-only handle may read a replica
}

func testReplicaUnacknowledged(t *testing.T, r replicated) {
	const wait = 300 * time.Millisecond
	s := r.g.must(t, "w", func(o *Options) { o.WaitReplicas, o.WaitTimeout = 1, wait })
	if err := s.Commit(t.Context(), batchAfter(t, s, 1)); err != nil {
		t.Fatal(err)
	}
	pause(t, r.rep)
	start := time.Now()
	err := s.Commit(t.Context(), batchAfter(t, s, 1))
	took := time.Since(start)
	want := "redis store: only 0 of 1 replicas acknowledged the commit within 300ms (store.wait_replicas): " +
		"it is not counted as committed; nothing acknowledged"
	if err == nil || err.Error() != want {
		t.Fatalf("commit with the replica paused: %v; want %q", err, want)
	}
	if took < wait || took > wait+2*time.Second {
		t.Fatalf("the commit failed after %v, want about %v", took, wait)
	}
	if st := s.SharedStats(); st.Failures != 1 || st.LastError != want {
		t.Fatalf("stats %+v: want the failure counted", st)
	}
	resume(t, r.srv, r.rep)
	if err := s.Commit(t.Context(), batchAfter(t, s, 1)); err != nil {
		t.Fatalf("commit after the replica resumed: %v", err)
	}
	if st := s.SharedStats(); st.LastError != "" || st.AsyncReplication != "" || st.Updates != 2 {
		t.Fatalf("stats %+v after a success", st)
	}
}

func testReplicaDecidedAgain(t *testing.T, r replicated) {
	s := r.g.must(t, "e", func(o *Options) { o.WaitReplicas, o.WaitTimeout = 1, 300*time.Millisecond })
	e := newEngine(t, s)
	if _, err := e.Process(t.Context(), []engine.Message{meterMsg(1, "before")}); err != nil {
		t.Fatal(err)
	}
	pause(t, r.rep)
	_, err := e.Process(t.Context(), []engine.Message{meterMsg(1, "during")})
	if err == nil || !strings.Contains(err.Error(), "only 0 of 1 replicas acknowledged") {
		t.Fatalf("process with the replica paused: %v", err)
	}
	resume(t, r.srv, r.rep)
	d, err := e.Process(t.Context(), []engine.Message{meterMsg(1, "during"), meterMsg(1, "after")})
	if err != nil {
		t.Fatalf("process after the replica resumed: %v", err)
	}
	if d[0].Outcome != engine.Duplicate || d[1].Outcome != engine.Applied {
		t.Fatalf("decided %v, %v; want duplicate (written, not acknowledged), applied", d[0].Outcome, d[1].Outcome)
	}
}

// resume resumes the replica and waits until it has caught up with the
// primary (the offset it acknowledged, at least once a second, is the
// primary's), so that the next commit's WAIT is answered at once.
func resume(t *testing.T, srv, rep *testbroker.Redis) {
	t.Helper()
	rep.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := srv.Do("INFO", "replication")
		text, _ := v.(string)
		var primary, acked string
		for line := range strings.Lines(text) {
			line = strings.TrimSpace(line)
			if p, ok := strings.CutPrefix(line, "master_repl_offset:"); ok {
				primary = p
			}
			if r, ok := strings.CutPrefix(line, "slave0:"); ok {
				for f := range strings.SplitSeq(r, ",") {
					if o, ok := strings.CutPrefix(f, "offset="); ok {
						acked = o
					}
				}
			}
		}
		if err == nil && primary != "" && acked == primary {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica has not caught up after 10s: %v\n%s", err, text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pause pauses the replica until it is resumed or the test ends.
func pause(t *testing.T, rep *testbroker.Redis) {
	t.Helper()
	rep.Pause()
	t.Cleanup(func() {
		if rep.Running() {
			rep.Resume() // a SIGCONT to a running process does nothing
		}
	})
}

// TestReplicationOnReconnect adds a replica under open handles: each new
// connection is checked, so once their connections are broken, the member
// that does not wait for replicas is refused and the one that accepts
// asynchronous replication says so.
func TestReplicationOnReconnect(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	g := newGroup(srv)
	refused := g.must(t, "a")
	allowed := g.must(t, "b", func(o *Options) { o.AllowAsyncReplication = true })
	for _, s := range []*Store{refused, allowed} {
		if err := s.Commit(t.Context(), batchAfter(t, s, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if st := allowed.SharedStats(); st.AsyncReplication != "" {
		t.Fatalf("AsyncReplication %q without a replica", st.AsyncReplication)
	}
	b := batchAfter(t, refused, 1)
	srv.StartReplica(t)
	g.do(t, "CLIENT", "KILL", "TYPE", "normal")
	err := refused.Commit(t.Context(), b)
	if err == nil || !strings.Contains(err.Error(), "1 replica is connected") || !strings.Contains(err.Error(), "store.wait_replicas is 0") {
		t.Fatalf("commit after a replica was added: %v; want a refusal naming store.wait_replicas", err)
	}
	if st := refused.SharedStats(); !strings.Contains(st.LastError, "store.wait_replicas is 0") {
		t.Fatalf("last error %q", st.LastError)
	}
	t.Logf("refused on reconnect: %v", err)
	if err := allowed.Commit(t.Context(), batchAfter(t, allowed, 1)); err != nil {
		t.Fatal(err)
	}
	if st := allowed.SharedStats(); !strings.Contains(st.AsyncReplication, "1 replica is connected") {
		t.Fatalf("AsyncReplication %q after a replica was added", st.AsyncReplication)
	}
}

func TestCommitTimeout(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	rep := srv.StartReplica(t)
	g := newGroup(srv)
	s := g.must(t, "a", func(o *Options) { o.WaitReplicas, o.CommitTimeout = 1, 200*time.Millisecond })
	pause(t, rep)
	start := time.Now()
	err := s.Commit(t.Context(), batchAfter(t, s, 1))
	if err == nil || !strings.Contains(err.Error(), "did not finish within the commit timeout (200ms)") ||
		!strings.Contains(err.Error(), "may or may not have been committed") {
		t.Fatalf("commit: %v; want the commit timeout", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the commit failed after %v, want about 200ms", took)
	}
	t.Logf("timed out: %v", err)
}
