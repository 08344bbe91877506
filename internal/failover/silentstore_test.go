package failover

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// A member whose host dies, or whose network to the store goes silent, in
// the middle of a batch leaves its PostgreSQL session in its transaction,
// holding the rows its batch locked: no FIN or RST reaches the server,
// whose TCP keepalive gives up after hours. Every other member's batch
// that names one of those rows waits for them. The server must end such a
// session once its member can no longer be in it (store.commit_timeout
// bounds a member's batch), so that the group goes on: the live member
// adopts the silent member's session once its lease runs out, and applies
// every message once.
func TestAMemberSilentInTheMiddleOfABatchDoesNotHoldTheGroupsRows(t *testing.T) {
	skipShort(t)
	u, viaProxy, proxy := storeBehindProxy(t, config.StorePostgres)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	brokers := []string{broker.URL()}
	const commitTimeout = 5 * time.Second
	opts := func(store fmt.Stringer) setupOptions {
		return setupOptions{API: true, ShareGroup: shareGroup, IDRoute: true, ReceiveMaximum: receiveMaximum,
			Store: fmt.Sprintf("{kind: postgres, url: %q, commit_timeout: %v}", store.String(), commitTimeout)}
	}
	silent := startDaemon(t, newSetupWith(t, brokers, opts(viaProxy)))
	live := startDaemon(t, newSetupWith(t, brokers, opts(u)))
	silent.WaitReady()
	live.WaitReady()
	pub := newPublisher(t, brokers, 20)
	sources := []string{"s1", "s2"}
	publishEach(t, pub, sources, 100)
	waitFor(t, "the first messages applied", 30*time.Second, func() bool {
		return appliedCounts(t, live, sources) == 100*len(sources)
	})

	published := freezeInATransaction(t, proxy, u.String(), pub, sources)
	frozenAt := time.Now()
	publishEach(t, pub, sources, 100)
	total := 100 + published + 100
	want := total * len(sources)
	bound := leaseTTL + commitTimeout + 20*time.Second
	for got := 0; got != want; got = appliedCounts(t, live, sources) {
		if time.Since(frozenAt) > bound {
			t.Fatalf("%d of the %d messages applied within %v of the silence", got, want, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("every message applied %v after the silent member's store went silent", time.Since(frozenAt).Round(time.Millisecond))
	checkAppliedOnce(t, live, sources, total)
}

// freezeInATransaction publishes sources' next sequences, a few at a
// time, and freezes proxy at a moment when one of the sessions it carries
// is in a transaction that holds locks (it has a transaction id), as a
// host that dies in the middle of a batch leaves it. It returns how many
// sequences of each source it published.
func freezeInATransaction(t *testing.T, proxy *cutProxy, storeURL string, pub *testbroker.Publisher, sources []string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	published := 0
	for ctx.Err() == nil {
		for _, src := range sources {
			if got := pub.Publish(ctx, src, 5); got != 5 {
				t.Fatalf("broker acknowledged %d of 5 publishes of %s", got, src)
			}
		}
		published += 5
		for range 20 {
			proxy.Freeze()
			var locking int
			err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY($1) AND backend_xid IS NOT NULL`,
				proxy.TargetPorts()).Scan(&locking)
			if err != nil {
				t.Fatal(err)
			}
			if locking > 0 {
				return published
			}
			proxy.Thaw()
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.Fatal("no session through the proxy was seen in a transaction holding locks within a minute")
	return 0
}

// Freeze stops forwarding, in both directions, without closing anything:
// what is sent through the proxy waits in it, as if the network between
// its ends had gone silent.
func (p *cutProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

// Thaw forwards again what waited and what comes.
func (p *cutProxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.thaw()
}

func (p *cutProxy) thaw() {
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

func (p *cutProxy) waitThawed() {
	p.mu.Lock()
	thawed := p.thawed
	p.mu.Unlock()
	<-thawed
}

// TargetPorts returns the local ports of the proxy's connections to its
// target: the client ports the target sees.
func (p *cutProxy) TargetPorts() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ports []int32
	for c := range p.toward {
		ports = append(ports, int32(c.LocalAddr().(*net.TCPAddr).Port))
	}
	return ports
}
