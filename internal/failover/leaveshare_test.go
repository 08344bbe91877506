package failover

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// A member of a group stopped with SIGTERM leaves the group's shared
// subscription: the broker deals every message published afterwards to
// the member still running, which decides them all at once, instead of
// keeping half of them in the stopped member's session until it returns.
func TestAStoppedMemberLeavesItsShareToTheLiveOnes(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) {
			skipShort(t)
			g, brokers := twoMembers(t, kind)
			stopped, live := g.members[0], g.members[1]
			stopped.Stop()
			pub := newPublisher(t, brokers, 20)
			publishEach(t, pub, []string{"s1"}, 100)
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				n := live.Metrics()["replayguard_decisions_total"]
				if n >= 100 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the live member decided %v of the 100 messages published after the other stopped, within 15 s", n)
				}
			}
			if logged(t, stopped, "left the share group") != 1 {
				t.Error("the stopped member did not log leaving the share group")
			}
		})
	}
}

// A member of a group that also consumes a Sparkplug route, whose
// subscription is not shared, leaves its share as it stops with SIGTERM
// while the edge goes on publishing: what the edge sends keeps coming to
// the member's own subscription, and waits in its session until it
// returns, so the member stops once its share is decided, not at the
// shutdown timeout.
func TestAMemberWithASparkplugRouteStopsOnceItsShareIsDecided(t *testing.T) {
	skipShort(t)
	server := startStoreServer(t, config.StorePostgres)
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	brokers := []string{m.URL()}
	g := &group{t: t, from: map[*daemon]uint64{}}
	for range 2 {
		s := newSetupWith(t, brokers, setupOptions{API: true, Store: fmt.Sprintf("{kind: %s, url: %q}", config.StorePostgres, server.URL()),
			ShareGroup: shareGroup, Sparkplug: true})
		g.members = append(g.members, startDaemon(t, s))
	}
	g.WaitReady()
	edge := newSpEdge(t, brokers, spGroup, spNode, 1)
	edge.connect()
	edge.birth(spFirstBirth)
	sp := startSpFeederEvery(t, edge, 20*time.Millisecond)
	defer sp.stop()
	stopped := g.members[0]
	waitFor(t, "the edge's data decided", 10*time.Second, func() bool {
		return stopped.Metrics()["replayguard_decisions_total"] > 10
	})
	began := time.Now()
	stopped.Stop()
	took := time.Since(began)
	if logged(t, stopped, "left the share group") != 1 || logged(t, stopped, "the session delivered nothing more") != 1 {
		t.Fatalf("the member stopped in %v without its session going quiet after it left the share group:\n%s", took, stopped.logText())
	}
}

// The last two members of a group stopped with SIGTERM at the same moment:
// one of them keeps the group's subscription, so the broker keeps the
// messages published while both are down in its session, and the members
// decide them all once they run again.
func TestTheLastTwoMembersStoppedAtOnceLoseNothing(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) {
			skipShort(t)
			g, brokers := twoMembers(t, kind)
			for _, d := range g.members {
				d.signal(syscall.SIGTERM)
			}
			for _, d := range g.members {
				<-d.exited
				if d.err != nil {
					t.Fatalf("replayguard run after SIGTERM: %v", d.err)
				}
			}
			left, kept := 0, 0
			for _, d := range g.members {
				left += logged(t, d, "left the share group")
				kept += logged(t, d, "keeping the share group's subscription, no other live member of the group holds it")
			}
			if left > 1 || kept < 1 {
				t.Fatalf("%d members left the share group and %d kept it, want at least one keeping it", left, kept)
			}
			pub := newPublisher(t, brokers, 20)
			publishEach(t, pub, []string{"s1"}, 100)
			for _, d := range g.members {
				d.Start()
			}
			g.WaitReady()
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				n := g.members[0].Metrics()["replayguard_decisions_total"] + g.members[1].Metrics()["replayguard_decisions_total"]
				if n >= 100 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the members decided %v of the 100 messages published while both were down, within 30 s of their restart", n)
				}
			}
		})
	}
}

// logged is how many lines of d's log hold text.
func logged(t testing.TB, d *daemon, text string) int {
	t.Helper()
	b, err := os.ReadFile(d.log)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte(text))
}

// twoMembers starts a group of two run members on a store server of kind
// and a Mosquitto of their own, whose addresses it returns.
func twoMembers(t *testing.T, kind string) (*group, []string) {
	return twoMembersSpeaking(t, kind, "")
}

// twoMembersSpeaking is twoMembers whose members speak MQTT protocol
// (mqtt.protocol; "": the default).
func twoMembersSpeaking(t *testing.T, kind, protocol string) (*group, []string) {
	server := startStoreServer(t, kind)
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	brokers := []string{m.URL()}
	store := fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL())
	return startGroupWith(t, 2, brokers, setupOptions{Store: store, Protocol: protocol}), brokers
}

// A member whose broker it cannot reach holds no subscription of the
// group: the only member that holds one keeps it as it stops, so the
// broker keeps the messages published meanwhile in its session, and the
// member decides them all once it runs again.
func TestAMemberNotYetSubscribedDoesNotLetTheLastSubscriberLeave(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) {
			skipShort(t)
			server := startStoreServer(t, kind)
			m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
			brokers := []string{m.URL()}
			store := fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL())
			live := startGroup(t, 1, brokers, store, false, "").members[0]
			unreachable := []string{fmt.Sprintf("tcp://127.0.0.1:%d", testbroker.FreePort(t))}
			cut := startDaemon(t, newSetupWith(t, unreachable, setupOptions{API: true, Store: store, ShareGroup: shareGroup,
				IDRoute: true, ReceiveMaximum: receiveMaximum}))
			waitFor(t, "the member without a broker failing to connect", 15*time.Second, func() bool {
				return logged(t, cut, "no broker answered") > 0
			})
			live.Stop()
			if n := logged(t, live, "left the share group"); n != 0 {
				t.Errorf("the only member subscribed left the share group while the other had never subscribed")
			}
			pub := newPublisher(t, brokers, 20)
			publishEach(t, pub, []string{"s1"}, 100)
			live.Start()
			live.WaitReady()
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				n := live.Metrics()["replayguard_decisions_total"]
				if n >= 100 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the member decided %v of the 100 messages published while it was down, within 15 s of its restart", n)
				}
			}
		})
	}
}

// A member whose connection was lost, and its session with it (expired at
// the broker, or started clean), holds no subscription of the group: the
// only member that holds one keeps it as it stops, so the broker keeps the
// messages published meanwhile in its session instead of dropping them,
// and the members decide them all once they run again.
func TestAMemberThatLostItsSessionDoesNotLetTheLastSubscriberLeave(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) {
			skipShort(t)
			server := startStoreServer(t, kind)
			m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
			store := fmt.Sprintf("{kind: %s, url: %q}", kind, server.URL())
			live := startGroup(t, 1, []string{m.URL()}, store, false, "").members[0]
			link := startTCPMover(t, m.Addr())
			cut := startDaemon(t, newSetupWith(t, []string{"tcp://" + link.Addr()}, setupOptions{API: true, Store: store,
				ShareGroup: shareGroup, IDRoute: true, ReceiveMaximum: receiveMaximum}))
			cut.WaitReady()
			link.MoveTo(fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t)))
			waitFor(t, "the cut member losing its connection", 15*time.Second, func() bool {
				return logged(t, cut, "mqtt connection lost") > 0
			})
			endSession(t, m.Addr(), member(cut))
			waitFor(t, "the cut member counted out of the share group", 15*time.Second, func() bool {
				return logged(t, cut, "counts this member out of the share group") > 0
			})
			live.Stop()
			if n := logged(t, live, "left the share group"); n != 0 {
				t.Fatal("the only member holding the group's subscription left it while the other member's session was gone")
			}
			if logged(t, live, "keeping the share group's subscription, no other live member of the group holds it") != 1 {
				t.Error("the member keeping its subscription did not say that no other live member holds it")
			}
			pub := newPublisher(t, []string{m.URL()}, 20)
			publishEach(t, pub, []string{"s1"}, 100)
			link.MoveTo(m.Addr())
			live.Start()
			live.WaitReady()
			cut.WaitReady()
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				n := live.Metrics()["replayguard_decisions_total"] + cut.Metrics()["replayguard_decisions_total"]
				if n >= 100 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the members decided %v of the 100 messages published while the subscribed one was down, within 15 s", n)
				}
			}
		})
	}
}

// probeOnly forwards the first connection to a loopback port to target,
// and holds every later one open without a word: a member's protocol probe
// reaches the broker, its consumer never does.
func probeOnly(t *testing.T, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for first := true; ; first = false {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if !first {
				wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
				continue
			}
			b, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, b)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(b, c); b.Close() })
			wg.Go(func() { _, _ = io.Copy(c, b); c.Close() })
		}
	})
	return l.Addr().String()
}

// endSession ends the broker's session of clientID, as its expiry would:
// a connection with a clean start takes the session over, and its
// disconnect with no session expiry ends it, subscriptions and all.
func endSession(t *testing.T, addr, clientID string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: clientID, Conn: conn})
	ca, err := c.Connect(t.Context(), &paho.Connect{ClientID: clientID, CleanStart: true, KeepAlive: 30})
	if err != nil {
		t.Fatalf("connect as %s to end its session: %v", clientID, err)
	}
	if ca.ReasonCode != 0 || ca.SessionPresent {
		t.Fatalf("connect as %s with a clean start: reason %#x, session present %v", clientID, ca.ReasonCode, ca.SessionPresent)
	}
	if err := c.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatalf("disconnect %s: %v", clientID, err)
	}
}

// A member that never reached its broker holds no subscription of the
// group: as it stops, it says so, not that no other member is live while
// another is.
func TestAMemberThatNeverSubscribedSaysSoAsItStops(t *testing.T) {
	skipShort(t)
	server := startStoreServer(t, config.StoreRedis)
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	store := fmt.Sprintf("{kind: %s, url: %q}", config.StoreRedis, server.URL())
	startGroup(t, 1, []string{m.URL()}, store, false, "")
	never := startDaemon(t, newSetupWith(t, []string{"tcp://" + probeOnly(t, m.Addr())}, setupOptions{API: true, Store: store,
		ShareGroup: shareGroup, IDRoute: true, ReceiveMaximum: receiveMaximum}))
	waitFor(t, "the member's consumer failing to connect", 30*time.Second, func() bool {
		return logged(t, never, "mqtt connect failed") > 0
	})
	never.Stop()
	if logged(t, never, "no other member of the group is live") != 0 || logged(t, never, "no other live member of the group holds it") != 0 {
		t.Fatalf("the member that never subscribed blamed the other members as it stopped, while one was live:\n%s", never.logText())
	}
	if logged(t, never, "not leaving the share group: the broker has not granted this member the group's subscription") != 1 {
		t.Fatalf("the member that never subscribed did not say so as it stopped:\n%s", never.logText())
	}
}
