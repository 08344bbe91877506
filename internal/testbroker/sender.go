package testbroker

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	paho3 "github.com/eclipse/paho.mqtt.golang"
)

// sender is a Publisher's connection: MQTT 5 or 3.1.1.
type sender interface {
	// publish sends one message and waits for the broker's acknowledgement.
	publish(ctx context.Context, topic string, payload []byte, qos byte) error
	// await waits until the connection is up.
	await(ctx context.Context) error
	// close disconnects; it may be called more than once.
	close()
}

// sender5 publishes over MQTT 5, a clean session without expiry,
// reconnecting to the brokers in order until dropped.
type sender5 struct {
	cm      *autopaho.ConnectionManager
	dropped atomic.Bool // drop was called: no reconnect
}

func newSender5(urls []*url.URL, clientID string, will *Will) (*sender5, error) {
	s := &sender5{}
	cfg := autopaho.ClientConfig{
		ServerUrls:                    urls,
		KeepAlive:                     5,
		CleanStartOnInitialConnection: true,
		ReconnectBackoff:              autopaho.NewConstantBackoff(100 * time.Millisecond),
		ConnectTimeout:                5 * time.Second,
		OnConnectionDown:              func() bool { return !s.dropped.Load() },
		ClientConfig:                  paho.ClientConfig{ClientID: clientID},
	}
	if will != nil {
		cfg.WillMessage = &paho.WillMessage{Topic: will.Topic, Payload: will.Payload, QoS: will.QoS, Retain: will.Retain}
	}
	var err error
	s.cm, err = autopaho.NewConnection(context.Background(), cfg)
	return s, err
}

// drop ends the connection without a DISCONNECT, as a crash would, and
// the reconnects with it.
func (s *sender5) drop() {
	s.dropped.Store(true)
	s.cm.TerminateConnectionForTest()
	select {
	case <-s.cm.Done(): // the connection was up: OnConnectionDown ended it
	case <-time.After(time.Second): // it was down: stop the reconnects
	}
	s.close()
}

func (s *sender5) publish(ctx context.Context, topic string, payload []byte, qos byte) error {
	_, err := s.cm.Publish(ctx, &paho.Publish{QoS: qos, Topic: topic, Payload: payload})
	return err
}

func (s *sender5) await(ctx context.Context) error { return s.cm.AwaitConnection(ctx) }

func (s *sender5) close() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	_ = s.cm.Disconnect(ctx)
}

// sender311 publishes over MQTT 3.1.1 with Eclipse paho.mqtt.golang, a
// clean session, reconnecting to the brokers in order.
type sender311 struct {
	c    paho3.Client
	once sync.Once
}

func newSender311(urls []*url.URL, clientID string) *sender311 {
	o := paho3.NewClientOptions().
		SetClientID(clientID).
		SetProtocolVersion(4).
		SetCleanSession(true).
		SetKeepAlive(5 * time.Second).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(100 * time.Millisecond).
		SetMaxReconnectInterval(100 * time.Millisecond).
		SetConnectTimeout(5 * time.Second).
		SetOrderMatters(false)
	for _, u := range urls {
		o.AddBroker(u.String())
	}
	s := &sender311{c: paho3.NewClient(o)}
	s.c.Connect() // with ConnectRetry, it keeps trying until Disconnect
	return s
}

func (s *sender311) publish(ctx context.Context, topic string, payload []byte, qos byte) error {
	tok := s.c.Publish(topic, qos, false, payload)
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *sender311) await(ctx context.Context) error {
	for !s.c.IsConnectionOpen() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func (s *sender311) close() {
	s.once.Do(func() { s.c.Disconnect(uint(stopTimeout / time.Millisecond / 10)) })
}
