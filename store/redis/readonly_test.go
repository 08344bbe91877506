package redis

import (
	"testing"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// A read-only handle writes nothing: opened on a group no member created
// yet (a read command run first, or with a mistyped store.prefix), on a
// server it now opens whatever it keeps, it must not create the group's
// schema key.
func TestAReadOnlyHandleWritesNoSchema(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
	g := newGroup(srv)
	s, err := g.open(t, "")
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	snap, err := s.Load(t.Context())
	if err != nil {
		t.Fatalf("read-only load of an empty group: %v", err)
	}
	if len(snap.Sources)+len(snap.Entities) != 0 {
		t.Fatalf("empty group reads %d rows", len(snap.Sources)+len(snap.Entities))
	}
	if n := g.do(t, "EXISTS", g.prefix+"schema"); n != int64(0) {
		keys := g.do(t, "KEYS", g.prefix+"*")
		t.Fatalf("a read-only open wrote to the server: keys %v", keys)
	}
}
