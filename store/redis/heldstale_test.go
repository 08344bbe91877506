package redis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// Members of the held index that entries resolved by a build from before
// the index left behind, however many sort before an open entry of the
// same key and content, do not hide it: a delivery of its message again
// is a duplicate naming it, where the update script's check found it and
// the lookup did not, and every decision of the batch lost the race.
func TestADeliveryAgainPastStaleIndexMembersIsADuplicateOfItsEntry(t *testing.T) {
	srv := testbroker.StartRedis(t, testbroker.RedisOptions{})
	g := newGroup(srv)
	s := g.must(t, "m1")
	e := newEngine(t, s)
	conflict, held := holdConflict(t, e)
	k, err := engine.ParseHash(held.Key.String())
	if err != nil {
		t.Fatal(err)
	}
	prefix := heldPrefix(k, engine.HeldContent(conflict.Topic, conflict.Payload))
	const stale = 20
	for i := 1; i <= stale; i++ { // entries with lower ids, resolved by a build from before
		g.do(t, "ZADD", g.prefix+"quarantine:held", "0", prefix+quarantineID(uint64(i)))
	}
	again, err := e.Process(t.Context(), []engine.Message{conflict})
	if err != nil {
		t.Fatalf("the conflict delivered again past %d stale members before its open entry #%d: %v", stale, held.Held, err)
	}
	want := fmt.Sprintf("delivered again: held in quarantine as #%d,", held.Held)
	if again[0].Outcome != engine.Duplicate || !strings.HasPrefix(again[0].Reason, want) {
		t.Fatalf("delivered again: %s (%s); want a duplicate naming #%d", again[0].Outcome, again[0].Reason, held.Held)
	}
}
