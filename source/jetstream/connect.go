package jetstream

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// connect opens the connection. It fails only for unusable options: an
// unreachable server is retried by nats.go, with a jittered, growing wait.
func (c *Consumer) connect() (*nats.Conn, error) {
	b := consume.Backoff{Min: c.cfg.BindRetryMin, Max: c.cfg.BindRetryMax}
	opts := []nats.Option{
		nats.Name(c.cfg.Name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.CustomReconnectDelay(b.Delay),
		nats.ConnectHandler(c.up),
		nats.ReconnectHandler(c.up),
		nats.DisconnectErrHandler(c.down),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.deniedGaveUp(err) }),
		nats.ReconnectErrHandler(func(nc *nats.Conn, err error) {
			err = connectError(err)
			c.log.Warn("jetstream reconnect failed", "server", c.cfg.URL, "err", err)
			c.obs.Observe(source.Event{Kind: source.ConnectFailed, Broker: c.serverURL(), Err: err})
		}),
	}
	if c.cfg.TLS != nil {
		opts = append(opts, nats.Secure(c.cfg.TLS))
	}
	if c.cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.cfg.CredsFile))
	}
	c.log.Info("jetstream connecting", "server", c.cfg.URL, "stream", c.cfg.Stream, "consumer", c.cfg.Consumer)
	nc, err := nats.Connect(c.cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect %s: %w", c.cfg.URL, connectError(err))
	}
	return nc, nil
}

// connectError is err of a failed connection attempt, saying what to do
// when the cause is plain: a tls:// URL of a server that does not speak
// TLS (nats.go says only "secure connection not available").
func connectError(err error) error {
	if errors.Is(err, nats.ErrSecureConnWanted) {
		return fmt.Errorf("the server does not speak TLS (jetstream.url is tls://; a plain NATS listener? its URL would be nats://): %w", err)
	}
	return err
}

func (c *Consumer) up(nc *nats.Conn) {
	u := nc.ConnectedUrlRedacted()
	c.server.Store(&u)
	c.connected.Store(true)
	c.log.Info("jetstream connected", "server", u, "consumer", c.cfg.Consumer)
	c.obs.Observe(source.Event{Kind: source.Connected, Broker: u})
}

func (c *Consumer) down(nc *nats.Conn, err error) {
	if !c.connected.Swap(false) {
		return // the first connection never came up, or already noted
	}
	if c.closing.Load() {
		c.log.Info("jetstream connection closed", "server", c.serverURL())
		c.obs.Observe(source.Event{Kind: source.Disconnected, Broker: c.serverURL()})
		return
	}
	c.log.Warn("jetstream connection lost; reconnecting", "server", c.serverURL(), "err", err)
	c.obs.Observe(source.Event{Kind: source.Disconnected, Broker: c.serverURL()})
}

func (c *Consumer) serverURL() string {
	if u := c.server.Load(); u != nil {
		return *u
	}
	return ""
}
