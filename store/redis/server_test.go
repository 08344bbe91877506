package redis

import (
	"net"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestDurability(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
	g := newGroup(srv)
	set := func(name, v string) { g.do(t, "CONFIG", "SET", name, v) }
	refused := func(setting string) {
		t.Helper()
		_, err := g.open(t, "a")
		if err == nil || !strings.Contains(err.Error(), setting) || !strings.Contains(err.Error(), "store.allow_not_durable") {
			t.Fatalf("open: %v; want a refusal naming %q and store.allow_not_durable", err, setting)
		}
	}
	t.Run("appendonly no is refused", func(t *testing.T) { refused(`appendonly is "no"`) })
	set("appendonly", "yes")
	t.Run("appendfsync everysec is refused", func(t *testing.T) { refused(`appendfsync is "everysec"`) })
	set("appendfsync", "always")
	set("maxmemory-policy", "allkeys-lru")
	t.Run("an evicting maxmemory-policy is refused", func(t *testing.T) { refused(`maxmemory-policy is "allkeys-lru"`) })
	t.Run("a read-only handle opens and says so", func(t *testing.T) {
		g.must(t, "a", func(o *Options) { o.AllowNotDurable = true }).Close() // the schema, as a member creates it
		st := g.must(t, "").SharedStats()
		if st.Durable || !strings.Contains(st.NotDurable, "maxmemory-policy") {
			t.Fatalf("stats say durable=%v %q", st.Durable, st.NotDurable)
		}
	})
	t.Run("the opt-out opens and says so", func(t *testing.T) {
		s := g.must(t, "a", func(o *Options) { o.AllowNotDurable = true })
		st := s.SharedStats()
		if st.Durable || !strings.Contains(st.NotDurable, "maxmemory-policy") {
			t.Fatalf("stats say durable=%v %q", st.Durable, st.NotDurable)
		}
	})
	set("maxmemory-policy", "noeviction")
	t.Run("a durable server opens", func(t *testing.T) {
		if st := g.must(t, "a").SharedStats(); !st.Durable || st.NotDurable != "" {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestDurabilityWithoutConfig(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{Extra: []string{"--rename-command", "CONFIG", ""}})
	g := newGroup(srv)
	_, err := g.open(t, "a")
	if err == nil || !strings.Contains(err.Error(), "appendfsync") || !strings.Contains(err.Error(), "CONFIG GET") {
		t.Fatalf("open: %v; want an error saying appendfsync cannot be checked without CONFIG GET", err)
	}
	s := g.must(t, "a", func(o *Options) { o.AllowNotDurable = true })
	if st := s.SharedStats(); st.Durable || !strings.Contains(st.NotDurable, "appendfsync") {
		t.Fatalf("stats say durable=%v %q", st.Durable, st.NotDurable)
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, err = Open(t.Context(), Options{URL: "redis://user:s3cret@" + addr + "/0", Member: "a"})
	t.Logf("unreachable: %v", err)
	if err == nil || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("open: %v; want an error naming %s without the password", err, addr)
	}
}

// TestRestart stops the server under an open handle: Update fails with an
// error naming the server, and once the server is back the same handle
// writes again, after the batch it had written before.
func TestRestart(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	g := newGroup(srv)
	s := g.must(t, "a")
	e := newEngine(t, s)
	if _, err := e.Process(t.Context(), []engine.Message{meterMsg(1, "before")}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	_, err := e.Process(t.Context(), []engine.Message{meterMsg(1, "during")})
	if err == nil || !strings.Contains(err.Error(), srv.Addr()) {
		t.Fatalf("process with the server down: %v; want an error naming %s", err, srv.Addr())
	}
	t.Logf("with the server down: %v", err)
	srv.Restart()
	d, err := e.Process(t.Context(), []engine.Message{meterMsg(1, "during"), meterMsg(1, "before")})
	if err != nil {
		t.Fatalf("process after the restart: %v", err)
	}
	if d[0].Outcome != engine.Applied || d[1].Outcome != engine.Duplicate || d[1].Position != 3 {
		t.Fatalf("decided %v at %d, %v at %d; the key written before the crash must be a duplicate",
			d[0].Outcome, d[0].Position, d[1].Outcome, d[1].Position)
	}
	if st := s.SharedStats(); st.Failures == 0 || st.LastError != "" {
		t.Fatalf("stats %+v: want a failure counted and no last error after the success", st)
	}
}
