package failover

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// TestStoreFailover is the broker's failover one layer down: three
// `replayguard run` members in one share group on Mosquitto, a sequenced
// feed and an id-route feed, on a shared store whose server streams to a
// standby (PostgreSQL) or a replica (Redis). Mid-stream the replica stops
// receiving (the walsender paused; the replica SIGSTOPped) while the
// members go on committing and acknowledging on the primary; one member is
// killed with SIGKILL; the primary is killed whole with SIGKILL; the
// replica is promoted and the members reach it (PostgreSQL: the multi-host
// URL with target_session_attrs=read-write; Redis: the address moves, as a
// floating IP or DNS name does); the killed member starts again.
//
// With asynchronous replication the promoted store lacks commits the
// members had acknowledged: each member must find that its chain is behind
// its journal, decide the lost deliveries again from it (the killed one at
// start), and audit the recovery. With a synchronous standby nothing is
// lost and nothing is recovered. Either way, read through the CLI as an
// operator would afterwards: every chain intact, every message the broker
// acknowledged applied exactly once (or, on the sequenced route, inside a
// gap the broker's own loss explains: none here, the broker never fails),
// state equal to the truth.
func TestStoreFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind string
		sync bool
	}{
		{"postgres with an asynchronous standby", config.StorePostgres, false},
		{"postgres with a synchronous standby", config.StorePostgres, true},
		{"redis with a replica", config.StoreRedis, false},
	} {
		t.Run(tc.name, func(t *testing.T) { storeFailover(t, tc.kind, tc.sync) })
	}
}

// replicated is a store server with a replica that a test cuts off and
// then promotes in place of the primary.
type replicated struct {
	store    string // the store section, as a YAML flow mapping
	url      string // the store's URL
	cutOff   func() // the replica stops receiving the primary's commits
	failOver func() // the primary dies whole; the replica takes its place
}

func startReplicated(t *testing.T, kind string, sync bool) replicated {
	t.Helper()
	switch kind {
	case config.StorePostgres:
		var settings []string
		if sync {
			settings = []string{"synchronous_standby_names=*"}
		}
		primary := testbroker.StartPostgresPrimary(t, testbroker.PostgresOptions{Settings: settings})
		standby := primary.StartStandby(t)
		store := fmt.Sprintf("{kind: postgres, url: %q, commit_timeout: 5s", testbroker.MultiHostURL(primary, standby))
		if !sync {
			store += ", allow_async_replication: true"
		}
		return replicated{store: store + "}", url: testbroker.MultiHostURL(primary, standby), cutOff: primary.PauseWALSender, failOver: func() {
			primary.KillAll()
			standby.Promote()
		}}
	case config.StoreRedis:
		primary := testbroker.StartRedis(t, testbroker.RedisOptions{})
		replica := primary.StartReplica(t)
		addr := startTCPMover(t, primary.Addr())
		return replicated{
			store:  fmt.Sprintf("{kind: redis, url: %q, allow_async_replication: true, commit_timeout: 5s}", "redis://"+addr.Addr()+"/0"),
			url:    "redis://" + addr.Addr() + "/0",
			cutOff: func() { primary.CutOffReplica(replica) },
			failOver: func() {
				primary.Kill()
				replica.Resume()
				replica.Promote()
				addr.MoveTo(replica.Addr())
			},
		}
	}
	t.Fatalf("no replicated store of kind %q", kind)
	return replicated{}
}

func storeFailover(t *testing.T, kind string, sync bool) {
	skipShort(t)
	rng := rand.New(rand.NewPCG(seed(t), 17))
	const members, perSource, rate, meterRate = 3, 600, 300, 60
	sources, meters := sourceNames(3), meterNames(3)
	server := startReplicated(t, kind, sync)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	brokers := []string{broker.URL()}
	g := startGroup(t, members, brokers, server.store, false, "")
	pub, meterPub := newPublisher(t, brokers, 20), newMeterPublisher(t, brokers, 20)
	total := int64(perSource * len(sources))
	f := startFeeder(t, pub, sources, 0, rate)
	mf := startFeeder(t, meterPub, meters, 0, meterRate)

	f.waitProgress(t, int64(uniform(rng, 0.2, 0.4)*float64(total)))
	server.cutOff()
	// Commits pile up on the primary alone, acknowledged to the broker.
	f.waitProgress(t, f.Attempted()+int64(300+rng.IntN(200)))
	victim := g.members[rng.IntN(members)]
	// Killed, not waited for: its last commit may wait on a synchronous
	// standby that no longer receives, and the server keeps that session.
	victim.Kill()
	time.Sleep(randDuration(rng, 0, 200*time.Millisecond))
	server.failOver()
	failed := time.Now()
	victim.Start()
	g.WaitReady()
	t.Logf("%d published: the replica cut off, member %s killed, the primary killed, the replica promoted; every member ready %v later",
		f.Attempted(), member(victim), time.Since(failed).Round(time.Millisecond))

	f.waitProgress(t, total)
	f.Stop()
	mf.Stop()
	publishTail(t, pub, sources, 20)
	g.members[0].WaitHigh(lastSequences(pub))
	g.WaitMeters(meterPub)
	waitStable(t, "the audit positions", time.Second, time.Minute, g.Positions)

	var losses, recovered float64
	for _, d := range g.members {
		m := d.Metrics()
		if m["replayguard_journal_bytes"] <= 0 {
			t.Errorf("member %s: replayguard_journal_bytes %.0f, want the journal it keeps", member(d), m["replayguard_journal_bytes"])
		}
		losses += m["replayguard_store_losses_total"]
		recovered += m["replayguard_store_recovered_total"]
		// Every delivery of the member's last run decided once; a
		// recovery adds the decisions on what the store lost.
		if recv, dec := m["replayguard_received_total"], m["replayguard_decisions_total"]; recv != dec-m["replayguard_store_recovered_total"] ||
			m["replayguard_in_flight"] != 0 || m["replayguard_store_loss"] != 0 {
			t.Errorf("member %s: received %.0f, decided %.0f of which %.0f recovered from the journal, in flight %.0f, still stopped by a loss %.0f",
				member(d), recv, dec, m["replayguard_store_recovered_total"], m["replayguard_in_flight"], m["replayguard_store_loss"])
		}
	}
	g.Stop()

	r := g.verify(t, feed{Pub: pub, Sources: sources, Meters: meterPub, MeterNames: meters})
	for _, rec := range r.Recoveries {
		t.Logf("member %s, position %d: %s", rec.Member, rec.Position, rec.Reason)
	}
	t.Logf("losses found %.0f, deliveries decided again from the journals %.0f, recovery records %d", losses, recovered, len(r.Recoveries))
	switch {
	case sync && (losses != 0 || len(r.Recoveries) != 0):
		t.Errorf("a synchronous standby lost commits: %.0f losses, %d recoveries", losses, len(r.Recoveries))
	case !sync && (losses == 0 || recovered == 0 || len(r.Recoveries) == 0):
		t.Errorf("the promoted replica lost nothing the members had acknowledged (%.0f losses, %.0f recovered, %d recovery records): the loss was not exercised",
			losses, recovered, len(r.Recoveries))
	}
	if r.Lost != 0 {
		t.Errorf("%d acknowledged messages only inside gaps: the broker never failed, so nothing may be missing", r.Lost)
	}
	for _, rec := range r.Recoveries {
		if !strings.Contains(rec.Reason, "decided again from the journal") {
			t.Errorf("recovery record %d of member %s does not say what was recovered: %q", rec.Position, rec.Member, rec.Reason)
		}
	}
}

// tcpMover forwards a loopback port to an address it can move, the way a
// floating IP or a DNS name follows a promoted server: moving it ends the
// connections to the old one.
type tcpMover struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  []net.Conn
}

func startTCPMover(t testing.TB, target string) *tcpMover {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &tcpMover{ln: ln, target: target}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go m.forward(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		m.closeAll()
	})
	return m
}

// Addr is the address clients connect to.
func (m *tcpMover) Addr() string { return m.ln.Addr().String() }

// MoveTo sends new connections to target and ends the open ones.
func (m *tcpMover) MoveTo(target string) {
	m.mu.Lock()
	m.target = target
	m.mu.Unlock()
	m.closeAll()
}

func (m *tcpMover) closeAll() {
	m.mu.Lock()
	conns := m.conns
	m.conns = nil
	m.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (m *tcpMover) forward(c net.Conn) {
	m.mu.Lock()
	target := m.target
	m.mu.Unlock()
	s, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	m.mu.Lock()
	m.conns = append(m.conns, c, s)
	m.mu.Unlock()
	go func() {
		io.Copy(s, c)
		s.Close()
	}()
	io.Copy(c, s)
	c.Close()
}
