package failover

import (
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// A member cut off from its store while its broker still reaches it can
// commit nothing: what the broker deals it waits unacknowledged. Once its
// lease has run out the live member adopts its session, and applies what
// it held and what the broker deals it after. The cut-off member must not
// take the session back meanwhile (it would hold the messages again, and
// the live member adopt it again, round after round): it stays off its
// brokers until it holds its lease again, then rejoins the group.
func TestAMemberCutOffFromItsStoreLeavesItsSessionToTheLiveOne(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) { memberCutOffFromItsStore(t, kind, "") })
	}
	// The MQTT 3.1.1 consumer connects in a loop of its own.
	t.Run("postgres, MQTT 3.1.1", func(t *testing.T) { memberCutOffFromItsStore(t, config.StorePostgres, config.ProtocolMQTT311) })
}

func memberCutOffFromItsStore(t *testing.T, kind, protocol string) {
	skipShort(t)
	u, viaProxy, proxy := storeBehindProxy(t, kind)
	broker := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	brokers := []string{broker.URL()}
	down := startDownstream(t)
	opts := func(store *url.URL) setupOptions {
		return setupOptions{API: true, Store: fmt.Sprintf("{kind: %s, url: %q}", kind, store.String()),
			ShareGroup: shareGroup, IDRoute: true, ReceiveMaximum: receiveMaximum, Protocol: protocol, Downstream: down.Broker.URL()}
	}
	cut := startDaemon(t, newSetupWith(t, brokers, opts(viaProxy)))
	live := startDaemon(t, newSetupWith(t, brokers, opts(u)))
	cut.WaitReady()
	live.WaitReady()
	pub := newPublisher(t, brokers, 20)
	sources := []string{"s1", "s2"}
	cutAt := cutUnderLoad(t, proxy, live, sources, pub)
	bound := leaseTTL + 20*time.Second
	waitFor(t, "every message applied, the cut-off member's share adopted", bound, func() bool {
		return appliedCounts(t, live, sources) == 300*len(sources)
	})
	t.Logf("every message applied %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	// Two more adoption rounds' time: a member that took its session back
	// would have been adopted again by now.
	time.Sleep(12 * time.Second)
	if n := logged(t, live, "adopting the session of a member gone"); n != 1 {
		t.Errorf("the live member logged %d adoptions of the cut-off member's session, want 1", n)
	}
	if n := logged(t, cut, "mqtt not connecting until the hold ends: this member's lease ran out"); n != 1 {
		t.Errorf("the cut-off member logged %d holds off its brokers, want 1", n)
	}

	proxy.Restore()
	waitFor(t, "the cut-off member ready again", storeNotice+15*time.Second, func() bool { return cut.ok("/readyz") })
	if n := logged(t, cut, "mqtt connecting again: the hold ended"); n != 1 {
		t.Errorf("the member back on its store logged %d ends of its hold, want 1", n)
	}
	publishEach(t, pub, sources, 100)
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, live, sources) == 400*len(sources)
	})
	checkAppliedOnce(t, live, sources, 400)
	before := cut.Metrics()["replayguard_decisions_total"]
	publishEach(t, pub, sources, 100)
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, live, sources) == 500*len(sources)
	})
	if n := cut.Metrics()["replayguard_decisions_total"]; n == before {
		t.Error("the member back on its store decided none of the last 200 messages: it did not rejoin the group")
	}
	// Every message applied reaches downstream, whichever member forwards
	// it (the cut-off member's outbox is taken over once its lease is gone).
	down.WaitKeys(t, appliedKeys(exportAudit(t, live)))
}

// storeBehindProxy starts a store server of kind and a cutProxy in front
// of it, and returns the server's URL and the one through the proxy.
func storeBehindProxy(t *testing.T, kind string) (direct, viaProxy *url.URL, proxy *cutProxy) {
	t.Helper()
	server := startStoreServer(t, kind)
	direct, err := url.Parse(server.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy = startCutProxy(t, direct.Host)
	through := *direct
	through.Host = proxy.Addr()
	return direct, &through, proxy
}

// cutProxy forwards TCP connections to a server until Cut, which closes
// them and refuses new ones (each accepted and closed at once) until
// Restore: a member cut off from its store while the rest of the group
// and the broker still reach it, which a real server cannot do alone.
type cutProxy struct {
	t      testing.TB
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	toward map[net.Conn]struct{} // of conns, those to the target
	thawed chan struct{}         // open while frozen
}

func startCutProxy(t testing.TB, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}, toward: map[net.Conn]struct{}{},
		thawed: make(chan struct{})}
	close(p.thawed)
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go p.accept()
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, s) {
		c.Close()
		s.Close()
		return
	}
	go p.pipe(s, c)
	p.pipe(c, s)
}

// pipe copies what src sends to dst until either ends, then closes both.
// While the proxy is frozen it holds what it read, and the end too.
func (p *cutProxy) pipe(dst, src net.Conn) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.waitThawed()
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// track records the pair of a forwarded connection, the one to the target
// last, unless cut.
func (p *cutProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	p.toward[conns[len(conns)-1]] = struct{}{}
	return true
}

// Cut closes every forwarded connection and refuses new ones.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	clear(p.toward)
	p.thaw()
}

// Restore forwards new connections again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// cutUnderLoad publishes 100 messages of each source through each of pubs
// and waits until d has applied them, then cuts proxy and publishes 200
// more of each. It returns when the cut was made.
func cutUnderLoad(t testing.TB, proxy *cutProxy, d *daemon, sources []string, pubs ...*testbroker.Publisher) time.Time {
	t.Helper()
	for _, pub := range pubs {
		publishEach(t, pub, sources, 100)
	}
	waitFor(t, "the first messages applied", 30*time.Second, func() bool {
		return appliedCounts(t, d, sources) == 100*len(sources)
	})
	proxy.Cut()
	cutAt := time.Now()
	for _, pub := range pubs {
		publishEach(t, pub, sources, 200)
	}
	return cutAt
}

// A member of mqtt.feeds cut off from its store keeps off the brokers of
// every path until it holds its lease again: the live member adopts its
// session on each path once, and applies what the cut-off member held.
func TestAFeedsMemberCutOffFromItsStoreLeavesEachPathsSessionToTheLiveOne(t *testing.T) {
	skipShort(t)
	u, viaProxy, proxy := storeBehindProxy(t, config.StorePostgres)
	feeds := map[string][]string{}
	var pubs []*testbroker.Publisher
	for _, p := range feedPaths {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		feeds[p] = []string{m.URL()}
		pubs = append(pubs, newPublisher(t, feeds[p], 20))
	}
	opts := func(store *url.URL) setupOptions {
		return setupOptions{API: true, Store: fmt.Sprintf("{kind: %s, url: %q}", config.StorePostgres, store.String()),
			ShareGroup: shareGroup, IDRoute: true, ReceiveMaximum: receiveMaximum}
	}
	cut := startDaemon(t, feedsSetup(t, feeds, opts(viaProxy)))
	live := startDaemon(t, feedsSetup(t, feeds, opts(u)))
	waitFeedsReady(t, cut)
	waitFeedsReady(t, live)
	sources := []string{"s1", "s2"}
	publish := func(n int) {
		for _, pub := range pubs {
			publishEach(t, pub, sources, n)
		}
	}
	cutAt := cutUnderLoad(t, proxy, live, sources, pubs...)
	waitFor(t, "every message applied, the cut-off member's share adopted on each path", leaseTTL+20*time.Second, func() bool {
		return appliedCounts(t, live, sources) == 300*len(sources)
	})
	t.Logf("every message applied %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	time.Sleep(12 * time.Second) // two more adoption rounds
	for _, p := range feedPaths {
		if n := loggedLines(t, live, "adopting the session of a member gone", "feed="+p); n != 1 {
			t.Errorf("the live member logged %d adoptions on path %s, want 1", n, p)
		}
	}

	proxy.Restore()
	waitFor(t, "the cut-off member ready again", storeNotice+15*time.Second, func() bool { return cut.ok("/readyz") })
	publish(100)
	waitFor(t, "every message applied", time.Minute, func() bool {
		return appliedCounts(t, live, sources) == 400*len(sources)
	})
	checkAppliedOnce(t, live, sources, 400)
}
