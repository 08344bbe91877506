package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
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

// msgID is an entry's Nats-Msg-Id: its key, and after it the forward's
// index in its route when that is not 0. Two forwards of one message whose
// subjects one stream takes are two copies, one key: with one id the
// stream would acknowledge the second as a duplicate and never store it.
// A copy sent again keeps its id, and is dropped.
func msgID(e engine.OutboxEntry) string {
	if i := e.ID & 0xff; i != 0 {
		return e.Key.String() + "." + strconv.FormatUint(i, 10)
	}
	return e.Key.String()
}

// natsWindow is how many publishes the NATS output has awaiting their
// PubAck at once.
const natsWindow = 256

// NATS publishes each entry's payload to JetStream on its subject (the
// entry's Target), in order, with Nats-Msg-Id set to the entry's key (see
// msgID), so that the stream's duplicate window drops a copy sent again, and the
// replayguard-* headers (see Properties). The PubAck acknowledges the entry
// (a duplicate's too); an entry is done once it and every one before it
// have theirs. A subject no stream takes fails the attempt with
// ErrNoStream: the entry waits until a stream does.
//
// Up to natsWindow publishes are written before their PubAcks are awaited,
// on one connection, which a stream stores in the order written. No entry
// that fails may have a later one stored before it in its stream:
//   - Each Deliver sends its first entry alone, and fills a window only
//     once it has its PubAck. Entries that wait for a stream (no stream
//     took their subject) are thus taken first to last by a stream
//     created meanwhile.
//   - A publish that fails ends the window, and the client does not retry
//     it (it would send it after the ones behind it).
//   - Nothing is buffered across a reconnect, and a window ends where the
//     connection changed: what the server had not read when the
//     connection dropped is lost with everything written after it, and
//     is sent again (under its key) by the next Deliver.
//
// An entry its stream refuses for good (over the stream's max_msg_size) is
// refused (a *RefusedError): held, as one over the server's max_payload
// (which counts the headers too: the refusal gives the copy's size and
// the limit).
// What a window can still reorder: entries of two streams in one window,
// the second stream created in the instant between the publish of its
// first entry (refused: no stream) and the next; and an entry the server
// answers with a passing error (a PubAck error, not a lost connection)
// while it stores the next.
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

func (n *NATS) connect() (*nats.Conn, jetstream.JetStream, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.js != nil {
		return n.nc, n.js, nil
	}
	opts := []nats.Option{
		nats.Name(n.opts.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectBufSize(-1), // see NATS: a publish while reconnecting fails
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil { // closed by this process (Close): no error to tell
				n.log.Debug("forward: nats connection closed")
				return
			}
			n.log.Warn("forward: nats connection lost; reconnecting", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { n.log.Info("forward: nats reconnected", "server", redactServers(c.ConnectedUrl())) }),
	}
	if n.opts.TLS != nil {
		opts = append(opts, nats.Secure(n.opts.TLS))
	}
	nc, err := nats.Connect(n.opts.URL, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrSecureConnWanted) {
			return nil, nil, fmt.Errorf("nats connect %s (outputs.nats.url): the server does not speak TLS (its URL would be nats://): %w", redactServers(n.opts.URL), err)
		}
		return nil, nil, fmt.Errorf("nats connect %s (outputs.nats.url): %w", redactServers(n.opts.URL), err)
	}
	// The client's own bound on publishes awaiting PubAcks (4,000) stays
	// above the window, with room for a window a cancelled Deliver left.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(n.opts.AckTimeout))
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("nats jetstream: %w", err)
	}
	n.nc, n.js = nc, js
	return nc, js, nil
}

// redactServers returns a comma-separated list of NATS server URLs as a log
// line or an error shows it: the user information of each URL, a user and
// password or a token given as the user, replaced with xxxxx.
func redactServers(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		switch u, err := url.Parse(strings.TrimSpace(p)); {
		case err != nil && strings.Contains(p, "@"):
			parts[i] = "(an unparsable URL)"
		case err == nil && u.User != nil:
			u.User = url.User("xxxxx")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

// Deliver implements Output: it writes a window of entries (the first
// alone, then up to natsWindow), then waits for their PubAcks in order.
func (n *NATS) Deliver(ctx context.Context, entries []engine.OutboxEntry) (int, error) {
	return n.deliverEach(ctx, entries, nil)
}

// deliverEach is Deliver, calling acked(i), when not nil, as soon as
// entries[i] and every one before it have their PubAcks: the drainer
// counts each entry delivered then, not once the whole page is, which a
// PubAck that does not come puts off by the ack timeout.
func (n *NATS) deliverEach(ctx context.Context, entries []engine.OutboxEntry, acked func(i int)) (int, error) {
	nc, js, err := n.connect()
	if err != nil {
		return 0, err
	}
	acks := make([]jetstream.PubAckFuture, 0, min(len(entries), natsWindow))
	done, window := 0, 1
	for done < len(entries) {
		acks = acks[:0]
		var failed error // of the publish of entries[done+len(acks)]
		conn := nc.Stats().Reconnects
		for _, e := range entries[done:min(len(entries), done+window)] {
			if nc.Stats().Reconnects != conn {
				break // the window's first publishes may be lost with the old connection
			}
			f, err := js.PublishMsgAsync(natsMsg(e), jetstream.WithMsgID(msgID(e)), jetstream.WithRetryAttempts(0))
			if err != nil {
				failed = err
				break
			}
			acks = append(acks, f)
		}
		window = natsWindow
		for _, f := range acks {
			select {
			case <-f.Ok():
				done++
				if acked != nil {
					acked(done - 1)
				}
			case err := <-f.Err():
				return done, n.failed(nc, entries, done, err)
			case <-ctx.Done():
				return done, ctx.Err()
			}
		}
		if failed != nil {
			return done, n.failed(nc, entries, done, failed)
		}
	}
	return len(entries), nil
}

func natsMsg(e engine.OutboxEntry) *nats.Msg {
	m := nats.NewMsg(e.Target)
	m.Data = e.Payload
	for _, p := range Properties(e) {
		m.Header.Set(p.Name, p.Value)
	}
	return m
}

// failed says why entries[i] was not delivered: a *RefusedError with its
// index when it never will be.
func (n *NATS) failed(nc *nats.Conn, entries []engine.OutboxEntry, i int, err error) error {
	e := entries[i]
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("%w: %q (create a stream with this subject)", ErrNoStream, e.Target)
	case errors.Is(err, nats.ErrMaxPayload):
		return &RefusedError{Index: i, Reason: fmt.Sprintf("nats: the copy to %q is %d bytes with its headers (a payload of %d), over the server's max_payload of %d bytes",
			e.Target, wireSize(e), len(e.Payload), nc.MaxPayload())}
	case apiErrorCode(err) == jetstream.JSErrCodeStreamMessageExceedsMaximum: // the stream's max_msg_size: for good
		return &RefusedError{Index: i, Reason: fmt.Sprintf("nats: the stream of %q refuses it: %v (%d bytes)", e.Target, err, len(e.Payload))}
	case errors.Is(err, nats.ErrReconnectBufExceeded): // nothing is buffered while reconnecting
		return fmt.Errorf("nats publish to %q: the connection is down, reconnecting", e.Target)
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		return fmt.Errorf("nats publish to %q: no PubAck within %s", e.Target, n.opts.AckTimeout)
	}
	return fmt.Errorf("nats publish to %q: %w", e.Target, err)
}

// wireSize is the size of e's copy as the server holds it to its
// max_payload: the payload and the header block the client sends with it
// ("NATS/1.0\r\n", a "Name: value\r\n" line per header, "\r\n"), the
// replayguard-* headers and Nats-Msg-Id.
func wireSize(e engine.OutboxEntry) int {
	size := len("NATS/1.0\r\n\r\n") + len(e.Payload)
	line := func(name, value string) { size += len(name) + len(": \r\n") + len(textproto.TrimString(value)) }
	for _, p := range Properties(e) {
		line(p.Name, p.Value)
	}
	line(jetstream.MsgIDHeader, msgID(e))
	return size
}

// apiErrorCode is the JetStream error code of a PubAck's error; 0 when it
// carries none.
func apiErrorCode(err error) jetstream.ErrorCode {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode
	}
	return 0
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
