package testbroker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// Received is one message a Subscriber received.
type Received struct {
	Topic   string
	Payload []byte
	// User holds the MQTT 5 user properties, the last value of each name.
	User map[string]string
	Dup  bool
}

// Subscriber is a downstream MQTT 5 client that records every message
// published to a filter, at QoS 1, in arrival order. Its session outlives
// a broker restart (a fixed client id, session expiry one hour), so what
// is published while it reconnects is kept for it. It is safe for
// concurrent use; Close (also run at cleanup) disconnects.
type Subscriber struct {
	cm *autopaho.ConnectionManager

	mu  sync.Mutex
	got []Received
}

// NewSubscriber subscribes to filter on the first reachable broker of urls
// and waits for the subscription.
func NewSubscriber(tb testing.TB, urls []string, filter string) *Subscriber {
	tb.Helper()
	s := &Subscriber{}
	subscribed := make(chan error, 1)
	expiry := uint32(3600)
	cm, err := autopaho.NewConnection(context.Background(), autopaho.ClientConfig{
		ServerUrls:            parseURLs(tb, urls),
		KeepAlive:             5,
		SessionExpiryInterval: expiry,
		ReconnectBackoff:      autopaho.NewConstantBackoff(100 * time.Millisecond),
		ConnectTimeout:        5 * time.Second,
		OnConnectionUp: func(cm *autopaho.ConnectionManager, ca *paho.Connack) {
			if ca.SessionPresent {
				return
			}
			go func() {
				_, err := cm.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}})
				select {
				case subscribed <- err:
				default:
				}
			}()
		},
		ClientConfig: paho.ClientConfig{
			ClientID: UniqueClientID("rg-sub"),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				r := Received{Topic: pr.Packet.Topic, Payload: append([]byte(nil), pr.Packet.Payload...), User: map[string]string{},
					Dup: pr.Packet.Duplicate()}
				if pr.Packet.Properties != nil {
					for _, u := range pr.Packet.Properties.User {
						r.User[u.Key] = u.Value
					}
				}
				s.mu.Lock()
				s.got = append(s.got, r)
				s.mu.Unlock()
				return true, nil
			}},
		},
	})
	if err != nil {
		tb.Fatalf("testbroker: subscriber: %v", err)
	}
	s.cm = cm
	tb.Cleanup(s.Close)
	select {
	case err := <-subscribed:
		if err != nil {
			tb.Fatalf("testbroker: subscribe %s: %v", filter, err)
		}
	case <-time.After(startTimeout):
		tb.Fatalf("testbroker: subscriber did not subscribe to %s on %v", filter, urls)
	}
	return s
}

// Messages returns what was received so far, in arrival order.
func (s *Subscriber) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.got...)
}

// Close disconnects.
func (s *Subscriber) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	_ = s.cm.Disconnect(ctx)
}
