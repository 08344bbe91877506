package failover

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// lostAfter is mqtt.adopt_lost_after in these tests: short, so that they
// run in seconds. A live member asks the store every 5 s (a third of the
// lease) for the sessions to adopt.
const lostAfter = 3 * time.Second

// lostBound is how long after a member lost its broker its share is
// applied at most: the wait, a round, the drain and a margin.
const lostBound = lostAfter + 17*time.Second

// A member that still reaches its store but lost its broker (a network
// cut between the two alone) keeps its lease, so no member adopts its
// session as a gone member's, while Mosquitto goes on dealing that
// offline session its share of the group's messages. Its share is marked
// lost instead, and the live member adopts the session once it has
// stayed lost for mqtt.adopt_lost_after: every message is applied once,
// within a bound after the cut. The member, back on its broker, takes its
// session again and rejoins the group.
func TestAMemberCutOffFromItsBrokerLeavesItsSessionToTheLiveOne(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		for _, protocol := range []string{config.ProtocolMQTT5, config.ProtocolMQTT311} {
			t.Run(kind+", MQTT "+protocol, func(t *testing.T) { memberCutOffFromItsBroker(t, kind, protocol, 1) })
		}
	}
}

// A member lost again after it returned from a loss, whose session was
// adopted, is adopted again: the adopter tells the losses apart by their
// time, though the member's process, and so its lease holder, is the same.
func TestAMemberLostAgainAfterItsReturnIsAdoptedAgain(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { memberCutOffFromItsBroker(t, kind, config.ProtocolMQTT5, 2) })
	}
}

// memberCutOffFromItsBroker cuts one of two members off its broker cuts
// times, each time until its session was adopted, then lets it back.
func memberCutOffFromItsBroker(t *testing.T, kind, protocol string, cuts int) {
	skipShort(t)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	proxy := startCutProxy(t, broker.Addr())
	server := startStoreServer(t, kind)
	opts := setupOptions{API: true, Store: fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL()), ShareGroup: shareGroup,
		ReceiveMaximum: receiveMaximum, Protocol: protocol, AdoptLostAfter: lostAfter.String()}
	cut := startDaemon(t, newSetupWith(t, []string{"tcp://" + proxy.Addr()}, opts))
	live := startDaemon(t, newSetupWith(t, []string{broker.URL()}, opts))
	cut.WaitReady()
	live.WaitReady()
	pub := newPublisher(t, []string{broker.URL()}, 20)
	sources := []string{"s1", "s2"}
	published := 100
	publishEach(t, pub, sources, 100)
	waitFor(t, "the first messages applied", 30*time.Second, func() bool {
		return appliedCounts(t, live, sources) == published*len(sources)
	})

	for i := 1; i <= cuts; i++ {
		proxy.Cut()
		cutAt := time.Now()
		publishEach(t, pub, sources, 200)
		published += 200
		want := published * len(sources)
		for n := appliedCounts(t, live, sources); n != want; n = appliedCounts(t, live, sources) {
			if time.Since(cutAt) > lostBound {
				t.Fatalf("cut %d: %d of the %d messages applied within %v of the member's cut from its broker, its store still reached: the rest wait in its session",
					i, n, want, lostBound)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("cut %d: every message applied %v after the cut", i, time.Since(cutAt).Round(time.Millisecond))
		waitFor(t, "the adoption ended, the session drained", 15*time.Second, func() bool {
			return logged(t, live, "adoption ended: the gone member's session delivered nothing more") == i
		})
		if n := logged(t, live, "adopting the session of a member gone"); n != i {
			t.Errorf("cut %d: the live member logged %d adoptions, want %d", i, n, i)
		}
		rejoin(t, proxy, cut, live, pub, sources, &published)
	}
	checkAppliedOnce(t, live, sources, published)
	if n := logged(t, cut, "adopting the session of a member gone"); n != 0 {
		t.Errorf("the member cut off from its broker logged %d adoptions, want none", n)
	}
}

// rejoin lets the member cut off back to its broker, and checks that it
// takes its session and rejoins the group: it decides some of what comes
// after.
func rejoin(t *testing.T, proxy *cutProxy, cut, live *daemon, pub *testbroker.Publisher, sources []string, published *int) {
	t.Helper()
	proxy.Restore()
	// Its reconnect backoff has grown during the cut (up to 8 s here).
	waitFor(t, "the member cut off ready again", 45*time.Second, func() bool { return cut.ok("/readyz") })
	before := cut.Metrics()["replayguard_decisions_total"]
	publishEach(t, pub, sources, 100)
	*published += 100
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, live, sources) == *published*len(sources)
	})
	if n := cut.Metrics()["replayguard_decisions_total"]; n == before {
		t.Error("the member back on its broker decided none of the last messages: it did not rejoin the group")
	}
}

// Mosquitto stopped for every member and started again: each member
// lost its broker, and its share is marked lost, but the first member
// back adopts none of the others while they are still in their reconnect
// backoff (its own connection must have been up for mqtt.adopt_lost_after
// first), and nothing is lost or applied twice. The members' backoffs
// here seldom leave one away while another's round comes, so the rule
// itself is pinned by the adopter's unit test
// (TestAMemberLostAgainIsAdoptedAgainAndOnlyByAMemberUpForTheWait).
func TestAfterABrokerOutageNoMemberAdoptsAnotherBackInTime(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { brokerOutage(t, kind) })
	}
}

func brokerOutage(t *testing.T, kind string) {
	skipShort(t)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	server := startStoreServer(t, kind)
	opts := setupOptions{API: true, Store: fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL()), ShareGroup: shareGroup,
		ReceiveMaximum: receiveMaximum, AdoptLostAfter: lostAfter.String()}
	brokers := []string{broker.URL()}
	members := []*daemon{startDaemon(t, newSetupWith(t, brokers, opts)), startDaemon(t, newSetupWith(t, brokers, opts))}
	for _, m := range members {
		m.WaitReady()
	}
	pub := newPublisher(t, brokers, 20)
	sources := []string{"s1", "s2"}
	publishEach(t, pub, sources, 100)
	waitFor(t, "the first messages applied", 30*time.Second, func() bool {
		return appliedCounts(t, members[0], sources) == 100*len(sources)
	})

	broker.Stop() // SIGTERM: it saves the sessions on the way out
	// Short of the wait, so that every member is back within it: their
	// reconnect backoff is a few seconds by then.
	time.Sleep(1500 * time.Millisecond)
	broker.Restart()
	for _, m := range members {
		waitFor(t, "every member back on the broker", 30*time.Second, func() bool { return m.ok("/readyz") })
	}
	// The producer reconnects on its own: a publish before fails at once.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := pub.AwaitConnection(ctx); err != nil {
		t.Fatalf("the producer did not reconnect to the restarted broker: %v", err)
	}
	publishEach(t, pub, sources, 200)
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, members[0], sources) == 300*len(sources)
	})
	// Two adoption rounds past the wait: an adoption would have come by now.
	time.Sleep(lostAfter + 10*time.Second)
	checkAppliedOnce(t, members[0], sources, 300)
	for i, m := range members {
		if n := logged(t, m, "adopting the session of a member gone"); n != 0 {
			t.Errorf("member %d adopted %d sessions after the broker's outage, want none: every member was back", i, n)
		}
		if n := logged(t, m, "counts this member out of the share group"); n == 0 {
			t.Errorf("member %d did not mark its share lost when the broker stopped", i)
		}
	}
}

// A member of mqtt.feeds cut off from the broker of one path, its store
// still reached, has its share there marked lost, and the live member
// adopts its session on that path alone once it has stayed lost: what the
// broker dealt it there is applied once. The member takes it back once
// its path is back.
func TestAFeedsMemberCutOffFromOnePathsBrokerLeavesThatSessionToTheLiveOne(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { feedsMemberCutOffFromOnePath(t, kind) })
	}
}

func feedsMemberCutOffFromOnePath(t *testing.T, kind string) {
	skipShort(t)
	server := startStoreServer(t, kind)
	brokers := map[string]*testbroker.Mosquitto{}
	for _, p := range feedPaths {
		brokers[p] = testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	}
	proxy := startCutProxy(t, brokers["a"].Addr())
	opts := setupOptions{API: true, Store: fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL()), ShareGroup: shareGroup,
		ReceiveMaximum: receiveMaximum, AdoptLostAfter: lostAfter.String()}
	cut := startDaemon(t, feedsSetup(t, map[string][]string{"a": {"tcp://" + proxy.Addr()}, "b": {brokers["b"].URL()}}, opts))
	live := startDaemon(t, feedsSetup(t, map[string][]string{"a": {brokers["a"].URL()}, "b": {brokers["b"].URL()}}, opts))
	waitFeedsReady(t, cut)
	waitFeedsReady(t, live)
	// Path a alone carries the messages: what its broker deals the member
	// cut off from it comes down no other path.
	pub := newPublisher(t, []string{brokers["a"].URL()}, 20)
	sources := []string{"s1", "s2"}
	cutAt := cutUnderLoad(t, proxy, live, sources, pub)
	for n := appliedCounts(t, live, sources); n != 300*len(sources); n = appliedCounts(t, live, sources) {
		if time.Since(cutAt) > lostBound {
			t.Fatalf("%d of the %d messages applied within %v of the member's cut from path a's broker: the rest wait in its session there",
				n, 300*len(sources), lostBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("every message applied %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	waitFor(t, "the adoption on path a ended, the session drained", 15*time.Second, func() bool {
		return loggedLines(t, live, "adoption ended: the gone member's session delivered nothing more", "feed=a") == 1
	})
	for path, want := range map[string]int{"a": 1, "b": 0} {
		if n := loggedLines(t, live, "adopting the session of a member gone", "feed="+path); n != want {
			t.Errorf("the live member logged %d adoptions on path %s, want %d", n, path, want)
		}
	}

	proxy.Restore()
	waitFor(t, "the member cut off ready again on every path", 45*time.Second, func() bool {
		ready, warning := readiness(cut)
		return ready && warning == ""
	})
	before := cut.Metrics()["replayguard_decisions_total"]
	publishEach(t, pub, sources, 100)
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, live, sources) == 400*len(sources)
	})
	checkAppliedOnce(t, live, sources, 400)
	if n := cut.Metrics()["replayguard_decisions_total"]; n == before {
		t.Error("the member back on path a decided none of the last messages: it did not rejoin the group there")
	}
}
