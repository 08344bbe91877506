package mqtt

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"

	"github.com/eclipse/paho.golang/autopaho"

	"github.com/replayguard/replayguard/internal/mqttconn"
)

// bufferedDialer returns autopaho's AttemptConnection for brokers it can
// dial itself, with a read buffer (mqttconn.DialBuffered): paho reads each
// packet in several small reads, a system call each without one. Its
// connections close gracefully once leave is set (see mqttconn.Conn.Close),
// and are the sync.Locker paho holds while it writes one packet in several
// calls, so that no other packet (a run of PUBACKs included, see ackGate)
// lands in between. It returns nil, leaving the dialling to autopaho, when
// a broker is reached over WebSocket or a proxy is configured in the
// environment.
func bufferedDialer(urls []*url.URL, tlsCfg *tls.Config, leave *mqttconn.Leaving) func(context.Context, autopaho.ClientConfig, *url.URL) (net.Conn, error) {
	for _, u := range urls {
		if !mqttconn.DialsItself(u) {
			return nil
		}
	}
	return func(ctx context.Context, cfg autopaho.ClientConfig, u *url.URL) (net.Conn, error) {
		conn, err := mqttconn.DialBuffered(ctx, u, tlsCfg, cfg.ConnectTimeout, leave)
		if err != nil {
			return nil, err
		}
		return conn, nil
	}
}
