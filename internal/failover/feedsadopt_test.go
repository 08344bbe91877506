package failover

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// Members of one share group that consume two redundant paths
// (mqtt.feeds a and b, one Mosquitto each; the producer publishes every
// message to both) record their share on each path. One killed with
// SIGKILL cannot leave, and each path's broker goes on dealing its session
// there a share of the group's messages; a message waits for it only
// when both brokers dealt it to the killed member. The live member adopts
// the killed member's session on each path, through that path's broker,
// once its lease is gone (at once here: its holder is a process on this
// host that has died), and applies every message, those published before
// the kill and those after it, exactly once, within the lease's ttl and a
// few seconds, while the killed member stays down.
func TestAKilledFeedsMembersShareIsAdoptedOnEachPath(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { killedFeedsMembersShareIsAdopted(t, kind) })
	}
}

func killedFeedsMembersShareIsAdopted(t *testing.T, kind string) {
	skipShort(t)
	killed, live, publish := twoFeedsMembers(t, kind)
	sources := []string{"s1", "s2"}
	publish(sources, 100)
	killed.Kill()
	killedAt := time.Now()
	publish(sources, 100)
	bound, want := leaseTTL+10*time.Second, 200*len(sources)
	for n := appliedCounts(t, live, sources); n != want; n = appliedCounts(t, live, sources) {
		if time.Since(killedAt) > bound {
			t.Fatalf("%d of the %d messages applied within %v of the kill, the killed member down: the rest wait in its sessions",
				n, want, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("all %d messages applied %v after the kill", want, time.Since(killedAt).Round(10*time.Millisecond))
	checkAppliedOnce(t, live, sources, 200)
	for _, p := range feedPaths {
		waitFor(t, "the adoption on path "+p+" ended, the session drained", 15*time.Second, func() bool {
			return loggedLines(t, live, "adoption ended: the gone member's session delivered nothing more", "feed="+p) == 1
		})
		if n := loggedLines(t, live, "adopting the session of a member gone", "feed="+p); n != 1 {
			t.Errorf("the live member logged %d adoptions on path %s, want 1", n, p)
		}
	}
	m := live.Metrics()
	if n := m["replayguard_share_adopted_deliveries_total"]; n == 0 {
		t.Error("replayguard_share_adopted_deliveries_total is 0: no delivery came through the adopted sessions")
	}
	if n := m["replayguard_share_adoptions_total/drained"]; n != float64(len(feedPaths)) || m["replayguard_share_adoptions_total"] != n {
		t.Errorf(`replayguard_share_adoptions_total{outcome="drained"} = %v of %v, want %d: one a path, each drained`,
			n, m["replayguard_share_adoptions_total"], len(feedPaths))
	}
}

// A member of mqtt.feeds that returns while the live member adopts its
// sessions takes each path's session back: each path's adoption ends at
// once and is not tried again, what the adopter had not acknowledged goes
// back to the returned member, which rejoins the group on each path, and
// nothing is lost or applied twice.
func TestAFeedsMemberReturningDuringItsAdoptionTakesEachPathsSessionBack(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { returningFeedsMemberTakesItsSessionsBack(t, kind) })
	}
}

func returningFeedsMemberTakesItsSessionsBack(t *testing.T, kind string) {
	skipShort(t)
	killed, live, publish := twoFeedsMembers(t, kind)
	sources := []string{"s1", "s2"}
	killed.Kill()
	publish(sources, 500) // about a quarter of them wait in both the killed member's sessions
	waitFor(t, "the live member adopting the killed member's session on every path", leaseTTL, func() bool {
		for _, p := range feedPaths {
			if loggedLines(t, live, "unsubscribed the gone member's session from the share group", "feed="+p) == 0 {
				return false
			}
		}
		return true
	})
	// Frozen, the adopter cannot finish before the member is back: the
	// member's connections take the sessions from it.
	live.Pause()
	if n := logged(t, live, "adoption ended"); n != 0 {
		t.Fatalf("an adoption ended before the member returned (%d lines): nothing to take back", n)
	}
	killed.Start()
	waitFeedsReady(t, killed)
	live.Resume()
	for _, p := range feedPaths {
		waitFor(t, "the adoption on path "+p+" ended by the member's return", 15*time.Second, func() bool {
			return loggedLines(t, live, "adoption ended: the gone member returned and took its session back", "feed="+p) == 1
		})
	}
	publish(sources, 100)
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, live, sources) == 600*len(sources)
	})
	checkAppliedOnce(t, live, sources, 600)
	for _, p := range feedPaths {
		if n := loggedLines(t, live, "adopting the session of a member gone", "feed="+p); n != 1 {
			t.Errorf("the live member logged %d adoptions on path %s, want 1: adopted again after the member returned", n, p)
		}
	}
	if n := killed.Metrics()["replayguard_decisions_total"]; n == 0 {
		t.Error("the returned member decided nothing: it did not get its sessions back or did not rejoin the group")
	}
}

// feedPaths are the paths of twoFeedsMembers: the feeds of mqtt.feeds.
var feedPaths = []string{"a", "b"}

// twoFeedsMembers starts two run members of one share group on a store
// server of kind, each consuming feedPaths (one Mosquitto each), and
// returns them with publish, which publishes n messages of each source
// to every path: the producer sends every message down both.
func twoFeedsMembers(t *testing.T, kind string) (first, second *daemon, publish func(sources []string, n int)) {
	t.Helper()
	server := startStoreServer(t, kind)
	feeds := map[string][]string{}
	var pubs []*testbroker.Publisher
	for _, p := range feedPaths {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		feeds[p] = []string{m.URL()}
		pubs = append(pubs, newPublisher(t, feeds[p], 20))
	}
	o := setupOptions{API: true, Store: fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL()),
		ShareGroup: shareGroup, IDRoute: true, ReceiveMaximum: receiveMaximum}
	first, second = startDaemon(t, feedsSetup(t, feeds, o)), startDaemon(t, feedsSetup(t, feeds, o))
	waitFeedsReady(t, first)
	waitFeedsReady(t, second)
	return first, second, func(sources []string, n int) {
		for _, pub := range pubs {
			publishEach(t, pub, sources, n)
		}
	}
}

// loggedLines counts the lines of d's log that hold every one of texts.
func loggedLines(t testing.TB, d *daemon, texts ...string) int {
	t.Helper()
	f, err := os.Open(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		all := true
		for _, text := range texts {
			all = all && strings.Contains(line, text)
		}
		if all {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
