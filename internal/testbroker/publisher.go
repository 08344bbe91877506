package testbroker

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	clientSeq atomic.Int64
	pid       = os.Getpid()
)

// UniqueClientID returns a client id that no other client of this test
// process uses: prefix-PID-N.
func UniqueClientID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, pid, clientSeq.Add(1))
}

// PublisherOptions configures a Publisher. Every field has a usable zero value.
type PublisherOptions struct {
	// ClientID of the publisher's connection. Empty means a unique id.
	ClientID string
	// Topic returns the topic of a source's messages. Nil means
	// "replayguard/test/<source>".
	Topic func(source string) string
	// Payload returns the message body of (source, sequence). Nil means
	// DefaultPayload.
	Payload func(source string, seq int64) []byte
	// Window is how many publishes may await their PUBACK at once. Zero
	// means 1: messages reach the broker in sequence order.
	Window int
	// QoS of every publish. Zero means 1.
	QoS byte
	// Will is registered with every CONNECT of the publisher: the broker
	// publishes it when the connection ends without a DISCONNECT (Drop).
	// Nil means none. MQTT 5 only.
	Will *Will
	// MQTT311 publishes over MQTT 3.1.1 (Eclipse paho.mqtt.golang) instead
	// of MQTT 5: for brokers that speak only 3.1.1, such as NATS 2.9's
	// MQTT listener.
	MQTT311 bool
}

// Will is a client's Will Message (MQTT 5 §3.1.2.5), published by the
// broker, with no delay, for a connection that ends without a DISCONNECT.
type Will struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
}

// DefaultPayload is the JSON body of (source, seq):
// {"source_id":"S","sequence":N,"boot_id":"boot-1","value":1}.
func DefaultPayload(source string, seq int64) []byte {
	return fmt.Appendf(nil, `{"source_id":%q,"sequence":%d,"boot_id":"boot-1","value":1}`, source, seq)
}

// Published is one publish attempt and its fate.
type Published struct {
	Source   string
	Sequence int64
	Topic    string
	Payload  []byte
	Acked    bool  // the broker sent PUBACK: it took responsibility for the message
	Err      error // why not, when not
}

// Publisher publishes QoS 1 messages carrying per-source sequences (1, 2, …)
// and records which ones the broker PUBACKed: the ground truth a failover
// test compares the consumer's effects against. It is safe for concurrent
// use; Close (also run at cleanup) disconnects.
type Publisher struct {
	tb   testing.TB
	opts PublisherOptions
	s    sender

	mu   sync.Mutex
	next map[string]int64
	all  []Published
}

// NewPublisher connects to the first reachable broker of urls (in order, a
// clean session without expiry) and waits for the connection.
func NewPublisher(tb testing.TB, urls []string, opts PublisherOptions) *Publisher {
	tb.Helper()
	if opts.ClientID == "" {
		opts.ClientID = UniqueClientID("rg-pub")
	}
	if opts.Topic == nil {
		opts.Topic = func(source string) string { return "replayguard/test/" + source }
	}
	if opts.Payload == nil {
		opts.Payload = DefaultPayload
	}
	opts.Window = max(opts.Window, 1)
	if opts.QoS == 0 {
		opts.QoS = 1
	}
	var (
		s   sender
		err error
	)
	switch {
	case opts.MQTT311 && opts.Will != nil:
		tb.Fatal("testbroker: publisher: a Will needs MQTT 5")
	case opts.MQTT311:
		s = newSender311(parseURLs(tb, urls), opts.ClientID)
	default:
		s, err = newSender5(parseURLs(tb, urls), opts.ClientID, opts.Will)
	}
	if err != nil {
		tb.Fatalf("testbroker: publisher: %v", err)
	}
	p := &Publisher{tb: tb, opts: opts, s: s, next: map[string]int64{}}
	tb.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.await(ctx); err != nil {
		tb.Fatalf("testbroker: publisher did not connect to %v: %v", urls, err)
	}
	return p
}

// AwaitConnection waits until the publisher is connected (after a failover,
// say) or ctx is done.
func (p *Publisher) AwaitConnection(ctx context.Context) error { return p.s.await(ctx) }

// Publish sends the next n sequences of source, at most Window awaiting
// PUBACK at a time, and returns how many were acknowledged. Failures are
// recorded, not retried.
func (p *Publisher) Publish(ctx context.Context, source string, n int) int {
	p.mu.Lock()
	first := p.next[source] + 1
	p.next[source] += int64(n)
	p.mu.Unlock()

	var (
		wg    sync.WaitGroup
		acked atomic.Int64
		sem   = make(chan struct{}, p.opts.Window)
	)
	for seq := first; seq < first+int64(n); seq++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if p.publishOne(ctx, source, seq).Acked {
				acked.Add(1)
			}
		})
	}
	wg.Wait()
	return int(acked.Load())
}

func (p *Publisher) publishOne(ctx context.Context, source string, seq int64) Published {
	m := Published{Source: source, Sequence: seq, Topic: p.opts.Topic(source), Payload: p.opts.Payload(source, seq)}
	m.Err = p.s.publish(ctx, m.Topic, m.Payload, p.opts.QoS)
	m.Acked = m.Err == nil
	p.mu.Lock()
	p.all = append(p.all, m)
	p.mu.Unlock()
	return m
}

// Republish sends msgs again, as they were, at most Window awaiting PUBACK
// at a time, and returns how many were acknowledged: a producer that sends
// again what it already sent, as a gateway does after its own restart. The
// copies are not recorded: each is a message already in All, and only
// messages the broker acknowledged may be sent again, so the record of
// which ones the broker took responsibility for stays true.
func (p *Publisher) Republish(ctx context.Context, msgs []Published) int {
	var (
		wg    sync.WaitGroup
		acked atomic.Int64
		sem   = make(chan struct{}, p.opts.Window)
	)
	for _, m := range msgs {
		if !m.Acked {
			p.tb.Errorf("testbroker: republish of %s#%d, which the broker never acknowledged", m.Source, m.Sequence)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := p.s.publish(ctx, m.Topic, m.Payload, p.opts.QoS); err == nil {
				acked.Add(1)
			}
		})
	}
	wg.Wait()
	return int(acked.Load())
}

// Send publishes one message outside the record and reports whether the
// broker acknowledged it: a test's own message that the ground truth must
// not count as a publish of a source, such as a conflicting copy of one.
func (p *Publisher) Send(ctx context.Context, topic string, payload []byte) bool {
	return p.s.publish(ctx, topic, payload, p.opts.QoS) == nil
}

// All returns every publish attempt so far, by source then sequence.
func (p *Publisher) All() []Published {
	p.mu.Lock()
	all := slices.Clone(p.all)
	p.mu.Unlock()
	slices.SortFunc(all, func(a, b Published) int {
		if a.Source != b.Source {
			return cmp.Compare(a.Source, b.Source)
		}
		return cmp.Compare(a.Sequence, b.Sequence)
	})
	return all
}

// Acked returns the publishes the broker acknowledged, by source then sequence.
func (p *Publisher) Acked() []Published {
	return slices.DeleteFunc(p.All(), func(m Published) bool { return !m.Acked })
}

// Drop ends the connection as a crash of the publisher would: the socket
// is closed without a DISCONNECT, so the broker publishes the Will, and
// the publisher does not connect again. Publishes after it fail. (A
// publisher that is between connections just stops.)
func (p *Publisher) Drop() {
	s5, ok := p.s.(*sender5)
	if !ok {
		p.tb.Fatal("testbroker: Drop needs an MQTT 5 publisher")
	}
	s5.drop()
}

// Close disconnects. It may be called more than once.
func (p *Publisher) Close() { p.s.close() }

func parseURLs(tb testing.TB, urls []string) []*url.URL {
	tb.Helper()
	out := make([]*url.URL, 0, len(urls))
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			tb.Fatalf("testbroker: broker url %q: %v", s, err)
		}
		out = append(out, u)
	}
	return out
}
