package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// naive is the consumer most feeds have today: a persistent MQTT 5 session,
// QoS 1, every delivery applied to the picture and acknowledged at once by
// paho. It trusts the broker to deliver each report once.
type naive struct {
	cfg   naiveConfig
	tally *tally

	mu  sync.Mutex
	pic picture

	cm     *autopaho.ConnectionManager
	broker atomic.Pointer[string] // the broker of the connection being made or up
	subs   sync.WaitGroup         // subscribe calls
	cancel context.CancelFunc
}

type naiveConfig struct {
	brokers  []string
	clientID string
	filter   string
	retry    time.Duration // between rounds of connection attempts
	log      *slog.Logger
}

func newNaive(cfg naiveConfig, t *tally) *naive {
	return &naive{cfg: cfg, tally: t, pic: picture{}}
}

// start connects (and keeps reconnecting) until stop.
func (n *naive) start() error {
	var urls []*url.URL
	for _, b := range n.cfg.brokers {
		u, err := url.Parse(b)
		if err != nil {
			return fmt.Errorf("naive consumer: %w", err)
		}
		urls = append(urls, u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls:                    urls,
		KeepAlive:                     30,
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         3600,
		ReconnectBackoff:              autopaho.NewConstantBackoff(n.cfg.retry),
		ConnectTimeout:                5 * time.Second,
		ConnectPacketBuilder: func(cp *paho.Connect, u *url.URL) (*paho.Connect, error) {
			s := u.String()
			n.broker.Store(&s)
			return cp, nil
		},
		OnConnectionUp: func(cm *autopaho.ConnectionManager, ca *paho.Connack) {
			n.tally.connected(n.brokerURL())
			if ca.SessionPresent {
				n.tally.setSubscribed(true)
				return
			}
			n.tally.setSubscribed(false)
			n.subs.Go(func() { n.subscribe(ctx, cm) })
		},
		OnConnectionDown: func() bool {
			n.tally.disconnected()
			return true
		},
		ClientConfig: paho.ClientConfig{
			ClientID:          n.cfg.clientID,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){n.receive},
		},
	})
	if err != nil {
		cancel()
		return fmt.Errorf("naive consumer: %w", err)
	}
	n.cm, n.cancel = cm, cancel
	return nil
}

// stop disconnects cleanly; the broker keeps the session.
func (n *naive) stop() {
	if n.cm == nil {
		return
	}
	n.cancel()
	<-n.cm.Done()
	n.subs.Wait()
	n.cm, n.cancel = nil, nil
	n.tally.disconnected()
}

func (n *naive) brokerURL() string {
	if b := n.broker.Load(); b != nil {
		return *b
	}
	return ""
}

func (n *naive) subscribe(ctx context.Context, cm *autopaho.ConnectionManager) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: n.cfg.filter, QoS: 1}}})
	if err != nil {
		n.cfg.log.Warn("naive consumer: subscribe failed", "err", err)
		return
	}
	n.tally.setSubscribed(true)
}

// receive applies every delivery, whatever it is; paho acknowledges it when
// this returns.
func (n *naive) receive(pr paho.PublishReceived) (bool, error) {
	n.tally.received(1)
	var r report
	var id *msgID
	if err := json.Unmarshal(pr.Packet.Payload, &r); err == nil {
		n.mu.Lock()
		n.pic.apply(r)
		n.mu.Unlock()
		rid := r.id()
		id = &rid
	}
	n.tally.handled(n.brokerURL(), id, pr.Packet.Duplicate(), "")
	return true, nil
}

// picture returns a copy of the naive consumer's picture.
func (n *naive) picture() picture {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := picture{}
	for e, fs := range n.pic {
		for f, v := range fs {
			out.set(e, f, v)
		}
	}
	return out
}
