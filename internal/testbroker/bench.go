package testbroker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	paho3 "github.com/eclipse/paho.mqtt.golang"
)

// Rate is a measured message rate.
type Rate struct {
	Messages int64
	Elapsed  time.Duration
}

// PerSecond is Messages per second of Elapsed.
func (r Rate) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

func (r Rate) String() string {
	return fmt.Sprintf("%.0f msg/s (%d in %v)", r.PerSecond(), r.Messages, r.Elapsed.Round(time.Millisecond))
}

// WaitReceived waits until received() reaches want, failing the test after
// timeout.
func WaitReceived(tb testing.TB, received func() int64, want int64, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for received() < want {
		if time.Now().After(deadline) {
			tb.Fatalf("testbroker: received %d of %d messages within %v", received(), want, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Throttle returns f called at most once per interval, answering its last
// value meanwhile: the measurements here poll received() every
// millisecond, and a count read over HTTP each time would take CPU from
// what is measured.
func Throttle(interval time.Duration, f func() int64) func() int64 {
	var last int64
	var at time.Time
	return func() int64 {
		if time.Since(at) >= interval {
			last, at = f(), time.Now()
		}
		return last
	}
}

// MeasureLive publishes n messages of source "bench" through pub while a
// consumer, already subscribed, takes them; the rate runs from the first
// publish to the moment received() has grown by n. With one publisher it is
// bounded by what the publisher reaches alone (see MeasurePublish).
func MeasureLive(tb testing.TB, pub *Publisher, n int, received func() int64) Rate {
	tb.Helper()
	base := received()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { pub.Publish(context.Background(), "bench", n) })
	WaitReceived(tb, func() int64 { return received() - base }, int64(n), time.Minute)
	elapsed := time.Since(start)
	wg.Wait()
	return Rate{Messages: int64(n), Elapsed: elapsed}
}

// MeasureBacklog publishes n messages of source "bench" while the consumer
// is offline (its persistent session must already hold the subscription),
// then calls start and returns how fast the consumer drains the backlog.
// start connects the consumer and returns its received-count function.
func MeasureBacklog(tb testing.TB, pub *Publisher, n int, start func() (received func() int64)) Rate {
	tb.Helper()
	if got := pub.Publish(context.Background(), "bench", n); got != n {
		tb.Fatalf("testbroker: broker acknowledged %d of %d backlog messages", got, n)
	}
	begin := time.Now()
	received := start()
	WaitReceived(tb, received, int64(n), time.Minute)
	return Rate{Messages: int64(n), Elapsed: time.Since(begin)}
}

// MeasurePublish returns the rate at which the broker acknowledges n
// publishes from pub with nobody consuming.
func MeasurePublish(tb testing.TB, pub *Publisher, n int) Rate {
	tb.Helper()
	start := time.Now()
	if got := pub.Publish(context.Background(), "bench", n); got != n {
		tb.Fatalf("testbroker: broker acknowledged %d of %d", got, n)
	}
	return Rate{Messages: int64(n), Elapsed: time.Since(start)}
}

// AutoAckConsumer is the baseline consumer: paho's own automatic acks (each
// PUBACK right after the handler returns), a persistent session, and a
// counter instead of any processing. Close (also run at cleanup) disconnects
// and keeps the session.
type AutoAckConsumer struct {
	cm         *autopaho.ConnectionManager
	received   atomic.Int64
	subscribed chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
	cancel     context.CancelFunc
}

// StartAutoAckConsumer connects clientID to url with a persistent session,
// subscribes to filter at QoS 1 when the broker has no session, and waits
// until it is subscribed or the session was present.
func StartAutoAckConsumer(tb testing.TB, url, clientID, filter string) *AutoAckConsumer {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &AutoAckConsumer{subscribed: make(chan struct{}), cancel: cancel}
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls:            parseURLs(tb, []string{url}),
		KeepAlive:             30,
		SessionExpiryInterval: 3600,
		ReconnectBackoff:      autopaho.NewConstantBackoff(100 * time.Millisecond),
		OnConnectionUp: func(cm *autopaho.ConnectionManager, ca *paho.Connack) {
			if ca.SessionPresent {
				c.once.Do(func() { close(c.subscribed) })
				return
			}
			c.wg.Go(func() {
				sub := &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}}
				if _, err := cm.Subscribe(ctx, sub); err == nil {
					c.once.Do(func() { close(c.subscribed) })
				}
			})
		},
		ClientConfig: paho.ClientConfig{
			ClientID: clientID,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){
				func(paho.PublishReceived) (bool, error) { c.received.Add(1); return true, nil },
			},
		},
	})
	if err != nil {
		cancel()
		tb.Fatalf("testbroker: auto-ack consumer: %v", err)
	}
	c.cm = cm
	tb.Cleanup(c.Close)
	select {
	case <-c.subscribed:
	case <-time.After(startTimeout):
		tb.Fatalf("testbroker: auto-ack consumer not subscribed within %v", startTimeout)
	}
	return c
}

// Received counts the deliveries so far.
func (c *AutoAckConsumer) Received() int64 { return c.received.Load() }

// Close disconnects and waits for the consumer's goroutines.
func (c *AutoAckConsumer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	_ = c.cm.Disconnect(ctx)
	c.cancel()
	c.wg.Wait()
}

// AutoAckConsumer311 is the MQTT 3.1.1 baseline consumer: Eclipse
// paho.mqtt.golang's automatic acks (each PUBACK as the handler returns,
// in order), a persistent session (CleanSession 0), and a counter instead
// of any processing. Close (also run at cleanup) disconnects and keeps the
// session.
type AutoAckConsumer311 struct {
	c        paho3.Client
	received atomic.Int64
	once     sync.Once
}

// StartAutoAckConsumer311 connects clientID to url over MQTT 3.1.1 with a
// persistent session, subscribes to filter at QoS 1, and waits until the
// subscription is granted.
func StartAutoAckConsumer311(tb testing.TB, url, clientID, filter string) *AutoAckConsumer311 {
	tb.Helper()
	c := &AutoAckConsumer311{}
	o := paho3.NewClientOptions().AddBroker(url).SetClientID(clientID).SetProtocolVersion(4).
		SetCleanSession(false).SetAutoReconnect(false).SetKeepAlive(30 * time.Second).
		SetDefaultPublishHandler(func(paho3.Client, paho3.Message) { c.received.Add(1) })
	c.c = paho3.NewClient(o)
	if tok := c.c.Connect(); !tok.WaitTimeout(startTimeout) || tok.Error() != nil {
		tb.Fatalf("testbroker: 3.1.1 auto-ack consumer: connect: %v", tok.Error())
	}
	tb.Cleanup(c.Close)
	if tok := c.c.Subscribe(filter, 1, nil); !tok.WaitTimeout(startTimeout) || tok.Error() != nil {
		tb.Fatalf("testbroker: 3.1.1 auto-ack consumer: subscribe: %v", tok.Error())
	}
	return c
}

// Received counts the deliveries so far.
func (c *AutoAckConsumer311) Received() int64 { return c.received.Load() }

// Close disconnects; it may be called more than once.
func (c *AutoAckConsumer311) Close() {
	c.once.Do(func() { c.c.Disconnect(uint(stopTimeout / time.Millisecond / 10)) })
}
