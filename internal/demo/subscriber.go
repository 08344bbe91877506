package demo

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// subscriber is the MQTT side of the demo's auto-acking consoles (the
// naive consumer, the dispatch board): a persistent MQTT 5 session, QoS 1,
// that subscribes again when the broker has no session for it, tells its
// tally about the connection, and hands every delivery to receive, which
// paho acknowledges when receive returns.
type subscriber struct {
	cfg     subscriberConfig
	tally   *tally
	receive func(pr paho.PublishReceived, broker string)

	cm     *autopaho.ConnectionManager
	broker atomic.Pointer[string] // the broker of the connection being made or up
	subs   sync.WaitGroup         // subscribe calls
	cancel context.CancelFunc
}

type subscriberConfig struct {
	name     string // in errors and logs: "naive consumer"
	brokers  []string
	clientID string
	filter   string
	retry    time.Duration // between rounds of connection attempts
	log      *slog.Logger
}

// start connects (and keeps reconnecting) until stop.
func (s *subscriber) start() error {
	var urls []*url.URL
	for _, b := range s.cfg.brokers {
		u, err := url.Parse(b)
		if err != nil {
			return fmt.Errorf("%s: %w", s.cfg.name, err)
		}
		urls = append(urls, u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls:                    urls,
		KeepAlive:                     30,
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         3600,
		ReconnectBackoff:              autopaho.NewConstantBackoff(s.cfg.retry),
		ConnectTimeout:                5 * time.Second,
		ConnectPacketBuilder: func(cp *paho.Connect, u *url.URL) (*paho.Connect, error) {
			b := u.String()
			s.broker.Store(&b)
			// MQTT 5's default, which autopaho's CONNECT turns into an
			// explicit 0; mochi then strips the user properties even from
			// PUBLISH (MQTT 5 §3.1.2.11.7 allows them there), and with them
			// the replayguard-key the dispatch board keys on.
			cp.Properties.RequestProblemInfo = true
			return cp, nil
		},
		OnConnectionUp: func(cm *autopaho.ConnectionManager, ca *paho.Connack) {
			s.tally.connected(s.brokerURL())
			if ca.SessionPresent {
				s.tally.setSubscribed(true)
				return
			}
			s.tally.setSubscribed(false)
			s.subs.Go(func() { s.subscribe(ctx, cm) })
		},
		OnConnectionDown: func() bool {
			s.tally.disconnected()
			return true
		},
		ClientConfig: paho.ClientConfig{
			ClientID: s.cfg.clientID,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				s.receive(pr, s.brokerURL())
				return true, nil
			}},
		},
	})
	if err != nil {
		cancel()
		return fmt.Errorf("%s: %w", s.cfg.name, err)
	}
	s.cm, s.cancel = cm, cancel
	return nil
}

// stop disconnects cleanly; the broker keeps the session.
func (s *subscriber) stop() {
	if s.cm == nil {
		return
	}
	s.cancel()
	<-s.cm.Done()
	s.subs.Wait()
	s.cm, s.cancel = nil, nil
	s.tally.disconnected()
}

func (s *subscriber) brokerURL() string {
	if b := s.broker.Load(); b != nil {
		return *b
	}
	return ""
}

func (s *subscriber) subscribe(ctx context.Context, cm *autopaho.ConnectionManager) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: s.cfg.filter, QoS: 1}}})
	if err != nil {
		s.cfg.log.Warn(s.cfg.name+": subscribe failed", "err", err)
		return
	}
	s.tally.setSubscribed(true)
}
