package failover

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
)

// leaseTTL is the members' lease (store.lease_ttl unset: the default).
const leaseTTL = 15 * time.Second

// A member of a group killed with SIGKILL cannot leave the share group,
// and the broker goes on dealing its session a share of the group's
// messages. The live member adopts that session once the killed member's
// lease is gone (at once here: its holder is a process on this host that
// has died) and applies every message, those published before the kill
// and those after it, exactly once, within the lease's ttl and a few
// seconds, while the killed member stays down: none waits in its session.
func TestAKilledMembersShareIsAdoptedByTheLiveOne(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { killedMembersShareIsAdopted(t, kind, "") })
	}
}

// Members speaking MQTT 3.1.1 adopt a killed member's session too, over
// MQTT 3.1.1 (Mosquitto has shared subscriptions for 3.1.1 clients).
func TestAKilledMQTT311MembersShareIsAdoptedByTheLiveOne(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { killedMembersShareIsAdopted(t, kind, config.ProtocolMQTT311) })
	}
}

func killedMembersShareIsAdopted(t *testing.T, kind, protocol string) {
	skipShort(t)
	g, brokers := twoMembersSpeaking(t, kind, protocol)
	killed, live := g.members[0], g.members[1]
	pub := newPublisher(t, brokers, 20)
	sources := []string{"s1", "s2"}
	publishEach(t, pub, sources, 100)
	killed.Kill()
	killedAt := time.Now()
	publishEach(t, pub, sources, 100)
	deadline, want := killedAt.Add(leaseTTL+10*time.Second), 200*len(sources)
	for n := appliedCounts(t, live, sources); n != want; n = appliedCounts(t, live, sources) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d messages applied within %v of the kill, the killed member down: the rest wait in its session",
				n, want, leaseTTL+10*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkAppliedOnce(t, live, sources, 200)
	waitFor(t, "the adoption ended, the session drained", 15*time.Second, func() bool {
		return logged(t, live, "adoption ended: the gone member's session delivered nothing more") == 1
	})
	if n := logged(t, live, "adopting the session of a member gone"); n != 1 {
		t.Errorf("the live member logged %d adoptions, want 1", n)
	}
	if n := live.Metrics()["replayguard_share_adopted_deliveries_total"]; n == 0 {
		t.Error("replayguard_share_adopted_deliveries_total is 0: no delivery came through the adopted session")
	}
}

// A killed member that returns while the live member adopts its session
// takes its session back: the adoption ends at once and is not tried
// again, what the adopter had not acknowledged goes back to the returned
// member, which rejoins the group, and nothing is lost or applied twice.
func TestAMemberReturningDuringItsAdoptionTakesItsSessionBack(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { returningMemberTakesItsSessionBack(t, kind, "") })
	}
}

// Under MQTT 3.1.1, which has no DISCONNECT from the broker, the store
// tells the adopter that the member is back, as with Mosquitto under 5.
func TestAnMQTT311MemberReturningDuringItsAdoptionTakesItsSessionBack(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { returningMemberTakesItsSessionBack(t, kind, config.ProtocolMQTT311) })
	}
}

func returningMemberTakesItsSessionBack(t *testing.T, kind, protocol string) {
	skipShort(t)
	g, brokers := twoMembersSpeaking(t, kind, protocol)
	killed, live := g.members[0], g.members[1]
	pub := newPublisher(t, brokers, 20)
	sources := []string{"s1", "s2"}
	killed.Kill()
	publishEach(t, pub, sources, 500) // about half of them wait in the killed member's session
	waitFor(t, "the live member adopting the killed member's session", leaseTTL, func() bool {
		return logged(t, live, "unsubscribed the gone member's session from the share group") > 0
	})
	// Frozen, the adopter cannot finish before the member is back:
	// the member's connection takes the session from it.
	live.Pause()
	if n := logged(t, live, "adoption ended"); n != 0 {
		t.Fatalf("the adoption ended before the member returned (%d lines): nothing to take back", n)
	}
	killed.Start()
	waitFor(t, "the returned member subscribed", 15*time.Second, func() bool { return killed.ok("/readyz") })
	live.Resume()
	waitFor(t, "the adoption ended by the member's return", 15*time.Second, func() bool {
		return logged(t, live, "adoption ended: the gone member returned and took its session back") == 1
	})
	publishEach(t, pub, sources, 100)
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, live, sources) == 600*len(sources)
	})
	checkAppliedOnce(t, live, sources, 600)
	if n := logged(t, live, "adopting the session of a member gone"); n != 1 {
		t.Errorf("the live member logged %d adoptions, want 1: adopted again after the member returned", n)
	}
	if n := killed.Metrics()["replayguard_decisions_total"]; n == 0 {
		t.Error("the returned member decided nothing: it did not get its session back or did not rejoin the group")
	}
}

// appliedCounts sums the count field of sources' entities, as d's API
// reads them from the group's store.
func appliedCounts(t testing.TB, d *daemon, sources []string) int {
	t.Helper()
	var state map[string]map[string]json.Number
	d.getJSON("/api/v1/state", &state)
	n := 0
	for _, src := range sources {
		c, _ := state["src/"+src][countField].Int64()
		n += int(c)
	}
	return n
}

// checkAppliedOnce checks, in the audit of every member's chain, that
// each of sources' sequences 1..n was applied exactly once, and that
// nothing was decided a conflict.
func checkAppliedOnce(t testing.TB, d *daemon, sources []string, n int) {
	t.Helper()
	applied := map[string]int{}
	for _, rec := range exportAudit(t, d) {
		if rec.Outcome == engine.Conflict.String() {
			t.Errorf("a conflict decided: %+v", rec)
		}
		if (rec.Outcome == engine.Applied.String() || rec.Outcome == engine.AppliedLate.String()) && rec.Sequence != nil {
			applied[fmt.Sprintf("%s/%d", strings.Join(rec.Source, ","), *rec.Sequence)]++
		}
	}
	for _, src := range sources {
		for seq := 1; seq <= n; seq++ {
			if got := applied[fmt.Sprintf("%s/%d", src, seq)]; got != 1 {
				t.Errorf("%s sequence %d applied %d times, want once", src, seq, got)
			}
		}
	}
	if want := n * len(sources); len(applied) != want {
		t.Errorf("%d distinct sequences applied, want %d", len(applied), want)
	}
}
