package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// The consumer pulls with requests of its own on core NATS, not with
// nats.go's pull iterator (jetstream.Consumer.Messages): as of nats.go
// v1.55 that takes any message with no payload and a Status header for a
// status of the server's, and a producer may publish such a message to the
// stream. It never reached the engine: a "400" or a "409 Consumer Deleted"
// ended Run on every start, any other was neither decided nor
// acknowledged, delivered again every AckWait for ever. Here a message is
// the server's only when it has no reply subject: every message a pull
// delivers from the stream has one ($JS.ACK.…, where its acknowledgement
// goes); the server's idle heartbeats, and the statuses that end a pull
// request, have none.

const (
	// pullExpires is how long one pull request waits on the server.
	pullExpires = 30 * time.Second
	// pullHeartbeat is how often the server tells a pull request that
	// waits that it holds it; two missed, and the consumer may be gone.
	pullHeartbeat = 15 * time.Second
)

// acker acknowledges a message the consumer holds: a *nats.Msg the pull
// delivered, acknowledged on its reply subject.
type acker interface {
	Ack(...nats.AckOpt) error
	Nak(...nats.AckOpt) error
	InProgress(...nats.AckOpt) error
}

// puller asks the server for the consumer's messages, delivered to an
// inbox of its own, keeping up to max messages asked for. Its methods are
// called from one goroutine, receive's.
type puller struct {
	nc      *nats.Conn
	subject string // the consumer's $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>
	max     int
	sub     *nats.Subscription
	msgs    chan *nats.Msg   // the inbox's messages; closed once it is drained or the connection closed
	stopped chan struct{}    // closed by stop: the inbox drops what it still holds
	status  chan nats.Status // connection up again, or lost
	asked   int              // messages asked for, neither delivered nor ended by a status
	ending  bool             // drain was called: no more requests
}

// newPuller subscribes an inbox for consumer's messages on stream, max
// asked for at once (MaxAckPending). It asks for nothing yet.
func newPuller(nc *nats.Conn, stream, consumer string, max int) (*puller, error) {
	p := &puller{nc: nc, subject: "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer, max: max,
		msgs: make(chan *nats.Msg, max), stopped: make(chan struct{})}
	sub, err := nc.Subscribe(nc.NewInbox(), func(m *nats.Msg) {
		select {
		case p.msgs <- m:
		case <-p.stopped: // unacknowledged: the server delivers it again
		}
	})
	if err != nil {
		return nil, err
	}
	// The server delivers at most MaxAckPending messages unacknowledged:
	// a client-side limit could only drop some, delivered again only after
	// AckWait.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	sub.SetClosedHandler(func(string) { close(p.msgs) }) // after the last message handed over
	p.sub = sub
	p.status = nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING)
	return p, nil
}

// ask asks for more messages once fewer than half of max are asked for.
func (p *puller) ask() error {
	if p.ending || p.asked >= (p.max+1)/2 {
		return nil
	}
	n := p.max - p.asked
	req := fmt.Appendf(nil, `{"batch":%d,"expires":%d,"idle_heartbeat":%d}`, n, pullExpires, pullHeartbeat)
	if err := p.nc.PublishRequest(p.subject, p.sub.Subject, req); err != nil {
		return err
	}
	p.asked = p.max
	return nil
}

// ended counts out the messages a request the server ended will not
// deliver: those its status says, else every one asked for.
func (p *puller) ended(m *nats.Msg) {
	n, err := strconv.Atoi(m.Header.Get("Nats-Pending-Messages"))
	if err != nil {
		n = p.asked
	}
	p.asked = max(p.asked-n, 0)
}

// drain asks for nothing more and unsubscribes the inbox: the messages the
// server sent already still come through, then msgs closes.
func (p *puller) drain() {
	p.ending = true
	_ = p.sub.Drain()
}

// stop lets go of the inbox, dropping what it still holds: unacknowledged,
// the server delivers it again.
func (p *puller) stop() {
	close(p.stopped)
	_ = p.sub.Unsubscribe()
	p.nc.RemoveStatusListener(p.status)
}

// receive pulls messages into in until ctx is done or the pull is over
// (end closed: drained), then closes in. A deleted consumer is sent to
// fatal. A message the server gave up on (gave) is taken from the stream
// into in (takeGaveUp).
func (c *Consumer) receive(ctx context.Context, cons jetstream.Consumer, p *puller, gave <-chan gaveUp, end <-chan struct{}, in chan<- delivery, fatal chan<- error) {
	defer close(in)
	defer p.stop()
	hb := time.NewTimer(2 * pullHeartbeat)
	defer hb.Stop()
	status := p.status
	for {
		if err := p.ask(); err != nil {
			c.log.Warn("jetstream pull request not sent", "server", c.serverURL(), "err", err)
		}
		select {
		case m, ok := <-p.msgs:
			if !ok {
				return
			}
			hb.Reset(2 * pullHeartbeat)
			if m.Reply == "" { // the server's
				if err := c.status(ctx, cons, p, m); err != nil {
					fatal <- err
					return
				}
				continue
			}
			p.asked = max(p.asked-1, 0)
			if !c.hand(ctx, m, in) {
				return
			}
		case s, ok := <-status:
			switch {
			case !ok:
				status = nil
			case s == nats.RECONNECTING: // the heartbeat timer runs on: a CONNECTED lost from a full channel must not stop it for good
			default: // connected again: the requests the server held are gone
				p.asked = 0
				hb.Reset(2 * pullHeartbeat)
				// And the consumer may be too, with no notice: nats-server
				// (2.9) answers no pull for a consumer it lacks.
				if err := c.gone(ctx, cons, c.held(p)); err != nil {
					fatal <- err
					return
				}
			}
		case <-hb.C:
			if p.ending {
				continue
			}
			if !p.nc.IsConnected() { // nats.go is reconnecting: no heartbeat is due
				hb.Reset(2 * pullHeartbeat)
				continue
			}
			c.log.Warn("jetstream pull: no heartbeat from the server; asking again", "server", c.serverURL(), "missed_for", 2*pullHeartbeat)
			if c.silent(ctx, p.nc) {
				hb.Reset(2 * pullHeartbeat) // connected again, the consumer asks again
				continue
			}
			if err := c.gone(ctx, cons, c.held(p)); err != nil {
				fatal <- err
				return
			}
			p.asked = 0
			hb.Reset(2 * pullHeartbeat)
		case g := <-gave:
			if !c.takeGaveUp(ctx, g, in) {
				return
			}
		case <-end:
			end = nil
			p.drain()
		case <-ctx.Done():
			return
		}
	}
}

// silent reports whether the connection carries nothing any more: the
// server does not answer a ping within apiTimeout. It then reconnects at
// once. A connection whose peer vanished with no FIN nor RST (a host or a
// NAT gone, a partition) looks open: nats.go gives up on it only after
// minutes of unanswered pings (PingInterval 2m, MaxPingsOut 2), while the
// pulls go nowhere and Ready says yes.
func (c *Consumer) silent(ctx context.Context, nc *nats.Conn) bool {
	if !nc.IsConnected() {
		return false // nats.go is reconnecting already
	}
	pctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if err := nc.FlushWithContext(pctx); !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || !nc.IsConnected() {
		return false
	}
	c.log.Warn("jetstream pull: the server does not answer on this connection; reconnecting", "server", c.serverURL(), "waited", apiTimeout)
	_ = nc.ForceReconnect()
	return true
}

// hand passes m on to in, held in progress from now on. It returns false
// when ctx is done first: m is left unacknowledged, delivered again.
func (c *Consumer) hand(ctx context.Context, m *nats.Msg, in chan<- delivery) bool {
	d := c.delivery(m)
	c.holding.add(d.js, d.at)
	select {
	case in <- d:
		c.obs.Observe(source.Event{Kind: source.Received, Broker: d.msg.Broker, N: 1})
		return true
	case <-ctx.Done():
		c.holding.release([]delivery{d})
		return false
	}
}

// status acts on a message of the server's: an idle heartbeat, or the end
// of a pull request. It returns the error that ends Run, when the consumer
// is gone.
func (c *Consumer) status(ctx context.Context, cons jetstream.Consumer, p *puller, m *nats.Msg) error {
	code, desc := m.Header.Get("Status"), m.Header.Get("Description")
	switch {
	case code == "100": // idle heartbeat (flow control is for push consumers)
		return nil
	case code == "408" || code == "404": // the request expired, or had nothing to wait for
		p.ended(m)
		return nil
	case code == "409" && strings.Contains(strings.ToLower(desc), "consumer deleted"):
		return c.deleted(ctx, code+" "+desc)
	}
	// Any other status ended or refused a request: 409 for a leadership
	// change, a server shutting down or a request over a limit of the
	// consumer's; 503 when nothing answers (no JetStream), 400 for a
	// request the server cannot read, after which the server is asked
	// whether the consumer is still there.
	p.ended(m)
	if code != "409" {
		if err := c.gone(ctx, cons, c.held(p)); err != nil {
			return err
		}
	}
	c.log.Warn("jetstream pull request ended by the server; asking again", "server", c.serverURL(), "status", code, "description", desc)
	consume.Sleep(ctx.Done(), c.cfg.BindRetryMin)
	return nil
}
