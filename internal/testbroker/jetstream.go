package testbroker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// CreateStream creates a file-backed JetStream stream called name taking
// subjects on the server, and fails the test if it cannot.
func (n *NATS) CreateStream(name string, subjects ...string) {
	n.tb.Helper()
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.FileStorage}); err != nil {
		n.tb.Fatalf("testbroker: create stream %s: %v", name, err)
	}
}

// UpdateStream changes stream's configuration with edit, as an
// operator's `nats stream edit` would, and fails the test if it cannot.
func (n *NATS) UpdateStream(name string, edit func(*jetstream.StreamConfig)) {
	n.tb.Helper()
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		n.tb.Fatalf("testbroker: stream %s: %v", name, err)
	}
	cfg := st.CachedInfo().Config
	edit(&cfg)
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		n.tb.Fatalf("testbroker: update stream %s: %v", name, err)
	}
}

// SetConsumerMaxDeliver sets the durable consumer's max_deliver on stream,
// as an operator's edit would, and fails the test if it cannot.
func (n *NATS) SetConsumerMaxDeliver(stream, consumer string, maxDeliver int) {
	n.tb.Helper()
	info, err := n.ConsumerInfo(stream, consumer)
	if err != nil {
		n.tb.Fatalf("testbroker: consumer %s on %s: %v", consumer, stream, err)
	}
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := info.Config
	cfg.MaxDeliver = maxDeliver
	if _, err := js.UpdateConsumer(ctx, stream, cfg); err != nil {
		n.tb.Fatalf("testbroker: update consumer %s on %s: %v", consumer, stream, err)
	}
}

// ConsumerInfo returns the state of the durable consumer on stream, or an
// error when the server cannot tell.
func (n *NATS) ConsumerInfo(stream, consumer string) (*jetstream.ConsumerInfo, error) {
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// DeleteConsumer deletes the durable consumer on stream, and fails the
// test if it cannot.
func (n *NATS) DeleteConsumer(stream, consumer string) {
	n.tb.Helper()
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := js.DeleteConsumer(ctx, stream, consumer); err != nil {
		n.tb.Fatalf("testbroker: delete consumer %s on %s: %v", consumer, stream, err)
	}
}

// DeleteStream deletes stream on the server, with its consumers, as an
// operator's `nats stream rm` does, and fails the test if it cannot.
func (n *NATS) DeleteStream(name string) {
	n.tb.Helper()
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, name); err != nil {
		n.tb.Fatalf("testbroker: delete stream %s: %v", name, err)
	}
}

// PurgeStream purges stream on the server, as an operator's `nats stream
// purge` does (with opts: a subject, a sequence to keep from, a count to
// keep), and fails the test if it cannot. It returns how many messages
// the server purged.
func (n *NATS) PurgeStream(name string, opts ...jetstream.StreamPurgeOpt) uint64 {
	n.tb.Helper()
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		n.tb.Fatalf("testbroker: stream %s: %v", name, err)
	}
	before := st.CachedInfo().State.Msgs
	if err := st.Purge(ctx, opts...); err != nil {
		n.tb.Fatalf("testbroker: purge stream %s: %v", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		n.tb.Fatalf("testbroker: stream %s: %v", name, err)
	}
	return before - info.State.Msgs
}

// StreamMessages returns how many messages the stream holds.
func (n *NATS) StreamMessages(name string) uint64 {
	n.tb.Helper()
	nc, js := n.JetStream()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		n.tb.Fatalf("testbroker: stream %s: %v", name, err)
	}
	return st.CachedInfo().State.Msgs
}

// JetStream connects a client of its own to the server, for a test that
// acts on streams and consumers as an operator or another program would;
// the caller closes the connection. It fails the test if it cannot.
func (n *NATS) JetStream() (*nats.Conn, jetstream.JetStream) {
	n.tb.Helper()
	nc, err := nats.Connect(n.URL(), nats.Name("testbroker"))
	if err != nil {
		n.tb.Fatalf("testbroker: connect to nats-server: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		n.tb.Fatalf("testbroker: jetstream: %v", err)
	}
	return nc, js
}

// JSMessage is one message a JSPublisher publishes.
type JSMessage struct {
	Subject string
	Data    []byte
	// ID is the Nats-Msg-Id: a copy published again (its PubAck lost to a
	// server restart) is dropped by the stream's duplicate window.
	ID string
}

// JSPublisher publishes to JetStream from its own goroutine, one message
// at a time, each retried until the server acknowledges it, across server
// restarts: the ground truth of a restart test is every message it
// published. It is safe for concurrent use.
type JSPublisher struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	acked atomic.Int64
	done  chan error
}

// PublishJS starts publishing msgs to the server at url, in order, as
// fast as the server acknowledges them. Wait returns when every one is
// acknowledged.
func PublishJS(url string, msgs []JSMessage) (*JSPublisher, error) {
	return PublishJSPaced(url, msgs, 0)
}

// PublishJSPaced is PublishJS with a pause of every after each
// acknowledged message: a steady feed that lasts, rather than a burst.
func PublishJSPaced(url string, msgs []JSMessage, every time.Duration) (*JSPublisher, error) {
	nc, err := nats.Connect(url, nats.Name("testbroker publisher"), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	p := &JSPublisher{nc: nc, js: js, done: make(chan error, 1)}
	go func() { p.done <- p.run(msgs, every) }()
	return p, nil
}

func (p *JSPublisher) run(msgs []JSMessage, every time.Duration) error {
	defer p.nc.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for _, m := range msgs {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := p.js.Publish(ctx, m.Subject, m.Data, jetstream.WithMsgID(m.ID))
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("publish %s: %w", m.ID, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		p.acked.Add(1)
		if every > 0 {
			time.Sleep(every)
		}
	}
	return nil
}

// PublishAgain publishes msgs once more, in order, and waits until the
// server acknowledged every one. A server killed with SIGKILL may lose
// messages it had acknowledged but not yet written (nats-server buffers
// its file store's writes): publishing the feed again after the restart
// stores what was lost, while the stream's duplicate window drops what it
// still holds (when its record survived the kill too).
func PublishAgain(url string, msgs []JSMessage, timeout time.Duration) error {
	p, err := PublishJS(url, msgs)
	if err != nil {
		return err
	}
	return p.Wait(timeout)
}

// Acked is how many messages the server has acknowledged so far.
func (p *JSPublisher) Acked() int { return int(p.acked.Load()) }

// Wait waits until every message is acknowledged, or timeout.
func (p *JSPublisher) Wait(timeout time.Duration) error {
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(timeout):
		return errors.New("testbroker: the JetStream publisher did not finish in time")
	}
}
