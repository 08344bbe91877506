package app

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/metrics"
	"github.com/replayguard/replayguard/source/mqtt"
)

// An adoption that ends before its session went quiet (here its broker
// was killed) leaves no claim held but those of the sessions its round
// adopts, which it releases: a member gone meanwhile, whose session the
// adopter claimed as it asked the store whether the adopted member was
// back, is free for another live member to adopt at once, not only once
// the adopter's claim runs out (the lease's ttl), while the adopter, its
// own connection down with the broker, adopts nothing.
func TestAnAdoptionEndedEarlyLeavesNoOtherGoneMembersClaimHeld(t *testing.T) {
	for _, kind := range []string{config.StorePostgres, config.StoreRedis} {
		t.Run(kind, func(t *testing.T) {
			if testing.Short() {
				t.Skip("starts servers")
			}
			url := startStoreServer(t, kind)
			m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
			a, c, x, y := openMember(t, kind, url, "a"), openMember(t, kind, url, "c"), openMember(t, kind, url, "x"), openMember(t, kind, url, "y")
			const group = "g"
			for _, h := range []struct {
				st     Store
				client string
			}{{a, "client-a"}, {c, "client-c"}} {
				if err := h.st.Capabilities().Share.JoinShare(t.Context(), group, h.client); err != nil {
					t.Fatal(err)
				}
			}
			holdShare(t, m.URL(), "client-a", group)
			pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
			if n := pub.Publish(t.Context(), "s1", 1); n != 1 {
				t.Fatalf("the broker acknowledged %d of 1 publish", n)
			}
			if err := a.Close(); err != nil { // gone, its share recorded
				t.Fatal(err)
			}

			p := &heldProcessor{held: make(chan struct{}), release: make(chan struct{})}
			ad := testAdopter(t, x, m.URL(), group, p)
			rounds := make(chan struct{})
			go func() {
				defer close(rounds)
				ad.round(t.Context())
			}()
			select {
			case <-p.held: // a's session resumed, its message in hand
			case <-time.After(15 * time.Second):
				t.Fatal("x did not adopt a's session")
			}
			if err := c.Close(); err != nil { // gone during a's adoption
				t.Fatal(err)
			}
			m.Kill() // the adoption's connection is lost
			close(p.release)
			select {
			case <-rounds:
			case <-time.After(30 * time.Second):
				t.Fatal("x's round did not end after its broker was killed")
			}

			got, err := y.Capabilities().Adopt.ClaimAdoptions(t.Context(), group, 0)
			if err != nil {
				t.Fatal(err)
			}
			var members []string
			for _, g := range got {
				members = append(members, g.Member)
			}
			if want := []string{"a", "c"}; !slices.Equal(members, want) {
				t.Fatalf("y claimed the sessions of %v once x's adoption ended, want %v: x holds a claim it does not adopt", members, want)
			}
		})
	}
}

// startStoreServer starts a shared store's server of kind and returns its
// URL.
func startStoreServer(t *testing.T, kind string) string {
	t.Helper()
	if kind == config.StorePostgres {
		return testbroker.StartPostgres(t, testbroker.PostgresOptions{}).URL()
	}
	return testbroker.StartRedis(t, testbroker.RedisOptions{}).URL()
}

// openMember opens the store at url under member, closed at the end of
// the test unless the test closed it.
func openMember(t *testing.T, kind, url, member string) Store {
	t.Helper()
	st, err := openStore(t.Context(), config.StoreConfig{Kind: kind, URL: url, Member: member}, config.WindowConfig{}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// holdShare leaves at the broker a session of clientID holding share group
// group's subscription to testbroker's default topics: it subscribes, then
// stops without leaving.
func holdShare(t *testing.T, url, clientID, group string) {
	t.Helper()
	c, err := mqtt.New(adoptTestConfig(url, clientID, group), &heldProcessor{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan error, 1)
	go func() { ended <- c.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); !c.Ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not subscribe", clientID)
		}
	}
	cancel()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
}

func adoptTestConfig(url, clientID, group string) mqtt.Config {
	return mqtt.Config{Brokers: []string{url}, ClientID: clientID, ShareGroup: group,
		Filters: []mqtt.Filter{{Topic: "replayguard/test/#", QoS: 1}}, ConnectTimeout: 2 * time.Second, ShutdownTimeout: 2 * time.Second}
}

// testAdopter is the adopter of member st, whose own client id is
// client-<member>, over MQTT 5; its rounds are the test's to run.
func testAdopter(t *testing.T, st Store, url, group string, p mqtt.Processor) *adopter {
	t.Helper()
	var logs testbroker.SyncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the adopter's log:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	return &adopter{group: group, store: st.Capabilities().Adopt, every: time.Hour, base: adoptTestConfig(url, "client-x", group), proc: p,
		ready: func() bool { return true }, consumer: func(cfg mqtt.Config, p mqtt.Processor) (runner, error) { return mqtt.New(cfg, p) },
		log: log, met: metrics.New(reg, "test", "").Adoptions(reg)}
}

// heldProcessor decides every batch, holding its first call until release
// is closed, once held is (both nil: holding none).
type heldProcessor struct {
	held, release chan struct{}
	once          sync.Once
}

func (p *heldProcessor) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	if p.held != nil {
		p.once.Do(func() {
			close(p.held)
			<-p.release
		})
	}
	return make([]engine.Decision, len(msgs)), nil
}
