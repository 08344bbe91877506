package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
)

// A consumer's max_deliver set on the server (`nats consumer edit`) makes
// the server give up on a message delivered that many times and never
// acknowledged (to a member killed while it held it, say): it never
// delivers it again, to any consumer, and the message would be neither
// decided nor told. The watch sets max_deliver back to unlimited, but only
// at its next reading. So Run listens to the server's advisory of each
// message it gave up on, takes the message from the stream by its
// sequence and decides it like a delivery (a copy of one decided already
// is found duplicate); one the stream no longer holds is told lost.

// gaveUpSubject is where nats-server publishes, for consumer on stream,
// an advisory of each message it gave up on after max_deliver deliveries.
func gaveUpSubject(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + consumer
}

// gaveUp is one such advisory.
type gaveUp struct {
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// listenGaveUp subscribes to the advisories of the messages the server
// gives up on, passing each to the channel it returns, until stop (which
// may be called more than once) is called.
func listenGaveUp(nc *nats.Conn, stream, consumer string) (<-chan gaveUp, func(), error) {
	ch := make(chan gaveUp, 64)
	done := make(chan struct{})
	sub, err := nc.Subscribe(gaveUpSubject(stream, consumer), func(m *nats.Msg) {
		var g gaveUp
		if json.Unmarshal(m.Data, &g) != nil || g.StreamSeq == 0 {
			return
		}
		select {
		case ch <- g:
		case <-done:
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, err
	}
	var once sync.Once
	return ch, func() { once.Do(func() { close(done); _ = sub.Unsubscribe() }) }, nil
}

// checkGaveUp tells, once the server has answered the subscription of
// listenGaveUp (a round trip), whether it refused it: nats-server answers
// a subscription the user's permissions deny with an error of its own
// (-ERR 'Permissions Violation for Subscription to …'), read before the
// round trip's answer, and otherwise keeps quiet, so nothing else shows
// that the advisories never come. A server that does not answer in time
// is not judged: a refusal still comes through the connection's error
// handler.
func (c *Consumer) checkGaveUp(ctx context.Context, nc *nats.Conn) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if nc.FlushWithContext(ctx) == nil {
		c.deniedGaveUp(nc.LastError())
	}
}

// deniedGaveUp notes err when it is the server's refusal of the
// subscription to the advisories of the messages it gives up on: warned
// of once per Run, and told by Warning from then on. Every other error
// is left alone.
func (c *Consumer) deniedGaveUp(err error) {
	subject := gaveUpSubject(c.cfg.Stream, c.cfg.Consumer)
	if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `"`+subject+`"`) {
		return
	}
	if c.gaveUpDenied.Swap(true) {
		return
	}
	c.log.Warn(gaveUpDeniedText(c.cfg.Stream, c.cfg.Consumer), "stream", c.cfg.Stream, "consumer", c.cfg.Consumer,
		"subject", subject, "err", err)
}

// gaveUpDeniedText says what follows from the refusal of the subscription
// to the advisories, and what to do.
func gaveUpDeniedText(stream, consumer string) string {
	return fmt.Sprintf("jetstream: the server does not allow this connection's user to subscribe to %s: "+
		"a message the server gives up on after the consumer's max_deliver (when one is set on the server, until the next reading of the consumer sets it back to unlimited) "+
		"is neither decided nor told lost; allow the user to subscribe to that subject (permissions: subscribe)",
		gaveUpSubject(stream, consumer))
}

// leftGaveUp returns the stream sequences of the advisories gave still
// holds, once nothing takes them any more.
func leftGaveUp(gave <-chan gaveUp) []uint64 {
	var seqs []uint64
	for {
		select {
		case g := <-gave:
			seqs = append(seqs, g.StreamSeq)
		default:
			return seqs
		}
	}
}

// taken acknowledges a message taken from the stream after the server
// gave up on it: the server holds nothing of it to acknowledge.
type taken struct{ seq uint64 }

func (taken) Ack(...nats.AckOpt) error        { return nil }
func (taken) InProgress(...nats.AckOpt) error { return nil }

// Nak cannot hand the message back: the server gave up on it.
func (taken) Nak(...nats.AckOpt) error { return errTakenNotHandedBack }

var errTakenNotHandedBack = errors.New("jetstream: a message the server gave up on cannot be handed back")

// takeGaveUp takes the message the server gave up on from the stream and
// hands it on to in, to be decided like a delivery; it tells it lost when
// the stream no longer holds it. It returns false when ctx is done first.
func (c *Consumer) takeGaveUp(ctx context.Context, g gaveUp, in chan<- delivery) bool {
	m, err := c.streamMsg(ctx, g.StreamSeq)
	if err != nil {
		c.log.Error("jetstream: the server gave up on a message after max_deliver deliveries (the consumer's max_deliver set on the server), and it could not be taken from the stream: never decided, with no audit record",
			"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "stream_sequence", g.StreamSeq, "deliveries", g.Deliveries, "err", err)
		c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: 1})
		c.owed.received(g.StreamSeq) // told
		return true
	}
	c.log.Warn("jetstream: the server gave up on a message after max_deliver deliveries (the consumer's max_deliver set on the server): taken from the stream by its sequence and decided",
		"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "stream_sequence", g.StreamSeq, "deliveries", g.Deliveries)
	d := c.decode(m.Subject, m.Data)
	d.js, d.at, d.delivered, d.streamSeq = taken{seq: g.StreamSeq}, time.Now(), g.Deliveries, g.StreamSeq
	c.receipts.taken(g.StreamSeq)
	c.owed.received(g.StreamSeq)
	d.msg.Dup = true // delivered before: recorded, never trusted
	c.prepare(&d)
	c.holding.add(d.js, d.at)
	select {
	case in <- d:
		c.obs.Observe(source.Event{Kind: source.Received, Broker: d.msg.Broker, N: 1})
		c.obs.Observe(source.Event{Kind: source.Redelivered, N: 1})
		return true
	case <-ctx.Done():
		c.holding.release([]delivery{d})
		c.tellTakenLeft([]uint64{g.StreamSeq})
		return false
	}
}

// streamMsg reads the message at seq from the stream.
func (c *Consumer) streamMsg(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	st, err := c.js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return nil, err
	}
	return st.GetMsg(ctx, seq)
}

// tellTakenLeft tells the messages taken from the stream after the
// server gave up on them that a stop left undecided: nothing delivers
// them again.
func (c *Consumer) tellTakenLeft(seqs []uint64) {
	if len(seqs) == 0 {
		return
	}
	c.log.Error("jetstream stopping: messages the server gave up on (max_deliver) left undecided: nothing will deliver them again; take them from the stream by their sequences (nats stream get)",
		"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "stream_sequences", seqs)
	c.obs.Observe(source.Event{Kind: source.Lost, Broker: c.serverURL(), N: len(seqs)})
}

// takenSeqs returns the stream sequences of the messages of left taken
// from the stream after the server gave up on them.
func takenSeqs(left []delivery) []uint64 {
	var seqs []uint64
	for i := range left {
		if t, ok := left[i].js.(taken); ok && !left[i].msg.Decided() {
			seqs = append(seqs, t.seq)
		}
	}
	return seqs
}

// prepare decodes d's message ahead, when the processor can.
func (c *Consumer) prepare(d *delivery) {
	if c.prep != nil {
		one := []engine.Message{d.msg}
		c.prep.Prepare(one)
		d.msg = one[0]
	}
}
