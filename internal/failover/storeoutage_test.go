package failover

import (
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// The whole group cut off from its store: every member's lease runs out,
// none can adopt another's session, and each keeps its connection (the
// hold keeps a member off only as it connects). When the store returns,
// every message published meanwhile is applied once, and every member is
// ready and takes its share again.
func TestAGroupCutOffFromItsStoreLosesNothingWhenItReturns(t *testing.T) {
	skipShort(t)
	_, viaProxy, proxy := storeBehindProxy(t, config.StorePostgres)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	brokers := []string{broker.URL()}
	opts := setupOptions{API: true, Store: fmt.Sprintf("{kind: %s, url: %q}", config.StorePostgres, viaProxy.String()),
		ShareGroup: shareGroup, IDRoute: true, ReceiveMaximum: receiveMaximum}
	a := startDaemon(t, newSetupWith(t, brokers, opts))
	b := startDaemon(t, newSetupWith(t, brokers, opts))
	a.WaitReady()
	b.WaitReady()
	pub := newPublisher(t, brokers, 20)
	sources := []string{"s1", "s2"}
	cutUnderLoad(t, proxy, a, sources, pub)
	time.Sleep(leaseTTL + 10*time.Second) // every lease ran out
	proxy.Restore()
	waitFor(t, "both members ready again", storeNotice+15*time.Second, func() bool { return a.ok("/readyz") && b.ok("/readyz") })
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, a, sources) == 300*len(sources)
	})
	beforeA, beforeB := a.Metrics()["replayguard_decisions_total"], b.Metrics()["replayguard_decisions_total"]
	publishEach(t, pub, sources, 100)
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, a, sources) == 400*len(sources)
	})
	checkAppliedOnce(t, a, sources, 400)
	if a.Metrics()["replayguard_decisions_total"] == beforeA || b.Metrics()["replayguard_decisions_total"] == beforeB {
		t.Error("a member decided none of the last 200 messages: it did not take its share again")
	}
	t.Logf("adoptions: a %d, b %d", logged(t, a, "adopting the session of a member gone"), logged(t, b, "adopting the session of a member gone"))
}
