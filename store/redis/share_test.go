package redis

import (
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// A server without persistence, restarted, has lost which members hold
// their share group's subscription: the members record it again as they
// renew their leases, so that a member stopping is granted leave again,
// and one granted leave is not recorded again.
func TestMembersRejoinTheirShareGroupAfterTheServerLostIt(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
	g := newGroup(srv)
	notDurable := func(o *Options) { o.AllowNotDurable = true }
	a, b := g.must(t, "a", notDurable), g.must(t, "b", notDurable)
	for _, s := range []*Store{a, b} {
		if err := s.JoinShare(t.Context(), "workers", "client-"+s.member); err != nil {
			t.Fatal(err)
		}
	}
	srv.Restart()
	if n := g.do(t, "EXISTS", g.prefix+"shares"); n != int64(0) {
		t.Fatalf("the restarted server still holds the shares hash (EXISTS = %v): nothing was lost", n)
	}
	// The lease lasts 3 s and is renewed every second.
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := srv.Do("HLEN", g.prefix+"shares")
		if err == nil && v == int64(2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the members' share groups were not recorded again within 5 s of the server's restart (HLEN = %v, %v)", v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	granted, err := b.LeaveShare(t.Context(), "workers")
	if err != nil || !granted {
		t.Fatalf("b's leave after the restart = %v, %v; want granted while a holds the group again", granted, err)
	}
	if err := b.renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v, _ := srv.Do("HEXISTS", g.prefix+"shares", "b"); v != int64(0) {
		t.Fatal("b, granted leave, was recorded in the share group again by its lease's renewal")
	}
}

// The shares of the members' paths (mqtt.feeds) are recorded again in the
// same way, each path a member holds; a path it quit is not.
func TestMembersRejoinTheirPathsAfterTheServerLostThem(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
	g := newGroup(srv)
	a := g.must(t, "a", func(o *Options) { o.AllowNotDurable = true })
	for _, path := range []string{"x", "y"} {
		if err := a.JoinSharePath(t.Context(), engine.SharePath{Path: path, Group: "workers", ClientID: "client-a-" + path}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.QuitSharePath(t.Context(), "y", "workers"); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	if n := g.do(t, "EXISTS", g.prefix+"sharepaths:a"); n != int64(0) {
		t.Fatalf("the restarted server still holds a's paths (EXISTS = %v): nothing was lost", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := srv.Do("HEXISTS", g.prefix+"sharepaths:a", "x")
		if err == nil && v == int64(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's share on path x was not recorded again within 5 s of the server's restart (HEXISTS = %v, %v)", v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v, _ := srv.Do("HEXISTS", g.prefix+"sharepaths:a", "y"); v != int64(0) {
		t.Fatal("a's share on path y, which it quit, was recorded again by its lease's renewal")
	}
}
