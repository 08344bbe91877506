package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
)

// Defaults of NATSOptions.
const (
	DefaultNATSURL        = nats.DefaultURL
	DefaultNATSAckTimeout = 10 * time.Second
)

// NATSOptions configure NewNATS.
type NATSOptions struct {
	// URL of the server (a comma-separated list for a cluster). Default
	// DefaultNATSURL.
	URL string
	// Name names the connection on the server. Default "replayguard".
	Name string
	// TLS, when set, is the TLS configuration of the connection.
	TLS *tls.Config
	// AckTimeout bounds the wait for one PubAck. Default
	// DefaultNATSAckTimeout.
	AckTimeout time.Duration
	// Logger hears about connection changes. Default: discard.
	Logger *slog.Logger
}

// NATS publishes each entry's payload to JetStream on its subject (the
// entry's Target), one at a time, in order, with Nats-Msg-Id set to the
// entry's key, so that the stream's duplicate window drops a copy sent
// again, and the replayguard-* headers (see Properties). The PubAck
// acknowledges the entry (a duplicate's too). A subject no stream takes
// fails the attempt with ErrNoStream: the entry waits until a stream does.
//
// It connects on the first Deliver and reconnects by itself.
type NATS struct {
	opts NATSOptions
	log  *slog.Logger

	mu sync.Mutex
	nc *nats.Conn
	js jetstream.JetStream
}

// NewNATS returns a NATS JetStream output. It does not connect yet.
func NewNATS(opts NATSOptions) (*NATS, error) {
	if opts.URL == "" {
		opts.URL = DefaultNATSURL
	}
	if opts.Name == "" {
		opts.Name = "replayguard"
	}
	if opts.AckTimeout < 0 {
		return nil, fmt.Errorf("%w: negative ack timeout", ErrConfig)
	}
	setDefault(&opts.AckTimeout, DefaultNATSAckTimeout)
	n := &NATS{opts: opts, log: opts.Logger}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	return n, nil
}

func (n *NATS) connect() (jetstream.JetStream, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.js != nil {
		return n.js, nil
	}
	opts := []nats.Option{
		nats.Name(n.opts.Name),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			n.log.Warn("forward: nats connection lost; reconnecting", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { n.log.Info("forward: nats reconnected", "server", c.ConnectedUrlRedacted()) }),
	}
	if n.opts.TLS != nil {
		opts = append(opts, nats.Secure(n.opts.TLS))
	}
	nc, err := nats.Connect(n.opts.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats connect %s: %w", n.opts.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats jetstream: %w", err)
	}
	n.nc, n.js = nc, js
	return js, nil
}

// Deliver implements Output.
func (n *NATS) Deliver(ctx context.Context, entries []engine.OutboxEntry) (int, error) {
	js, err := n.connect()
	if err != nil {
		return 0, err
	}
	for i, e := range entries {
		if err := n.publish(ctx, js, e); err != nil {
			var ref *RefusedError
			if errors.As(err, &ref) {
				ref.Index = i
			}
			return i, err
		}
	}
	return len(entries), nil
}

func (n *NATS) publish(ctx context.Context, js jetstream.JetStream, e engine.OutboxEntry) error {
	m := nats.NewMsg(e.Target)
	m.Data = e.Payload
	for _, p := range Properties(e) {
		m.Header.Set(p.Name, p.Value)
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.AckTimeout)
	defer cancel()
	_, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(e.Key.String()))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("%w: %q (create a stream with this subject)", ErrNoStream, e.Target)
	case errors.Is(err, nats.ErrMaxPayload):
		return &RefusedError{Reason: fmt.Sprintf("nats: %v (%d bytes)", err, len(e.Payload))}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return fmt.Errorf("nats publish to %q: no PubAck within %s", e.Target, n.opts.AckTimeout)
	}
	return fmt.Errorf("nats publish to %q: %w", e.Target, err)
}

// Close implements Output: it closes the connection.
func (n *NATS) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nc != nil {
		n.nc.Close()
		n.nc, n.js = nil, nil
	}
	return nil
}
