package jetstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source"
	"github.com/replayguard/replayguard/source/internal/consume"
)

// bind finds the stream and creates or updates the durable consumer,
// retrying with a growing wait while the server cannot answer. A missing
// stream or a refused consumer ends it with ErrStream. It returns the
// consumer and the stream's subjects.
func (c *Consumer) bind(ctx context.Context, nc *nats.Conn) (jetstream.Consumer, []string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	c.js = js
	b := consume.Backoff{Min: c.cfg.BindRetryMin, Max: c.cfg.BindRetryMax}
	for attempt := 1; ; attempt++ {
		cons, subjects, err := c.bindOnce(ctx, js)
		if err == nil {
			c.unbound.Store(nil)
			c.bound.Store(true)
			c.noteRoutes(subjects, "bind")
			c.noteIdle(nil, subjects, "bind")
			return cons, subjects, nil
		}
		if errors.Is(err, ErrStream) || ctx.Err() != nil {
			return nil, nil, err
		}
		why := err.Error()
		c.unbound.Store(&why)
		wait := b.Delay(attempt)
		c.log.Warn("jetstream cannot bind the consumer yet; trying again", "server", c.cfg.URL,
			"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "attempt", attempt, "wait", wait, "err", err)
		c.obs.Observe(source.Event{Kind: source.ConnectFailed, Broker: c.serverURL(), Err: err})
		if !consume.Sleep(ctx.Done(), wait) {
			return nil, nil, ctx.Err()
		}
	}
}

func (c *Consumer) bindOnce(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	mark, marked := c.readMark(ctx)
	st, err := js.Stream(ctx, c.cfg.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		c.goneWhileStopped(ctx, mark, marked, nil)
		return nil, nil, fmt.Errorf("%w: stream %q not found on %s: create it, or set jetstream.stream", ErrStream, c.cfg.Stream, c.serverURL())
	case errors.Is(err, nats.ErrNoResponders):
		return nil, nil, fmt.Errorf("no JetStream answers on %s (is the server run with -js?): %w", c.serverURL(), err)
	case err != nil:
		return nil, nil, err
	}
	c.goneWhileStopped(ctx, mark, marked, st.CachedInfo())
	// stood is where this store stood on the stream found, when known: a
	// stream created since the mark was kept is new to it.
	stood, known := mark, marked
	if created := st.CachedInfo().Created; marked && !mark.Created.Equal(created) {
		stood = engine.StreamMark{Created: created, Stopped: true}
	}
	marked = marked && mark.Created.Equal(st.CachedInfo().Created) // else the mark was of a stream gone
	if err := c.skipped(ctx, st); err != nil {
		return nil, nil, err
	}
	prev, err := st.Consumer(ctx, c.cfg.Consumer)
	existed := err == nil
	switch {
	case errors.Is(err, jetstream.ErrNotPullConsumer):
		return nil, nil, fmt.Errorf("%w: consumer %q on stream %q is a push consumer (it has a deliver subject), and replayguard pulls: delete it, or name another jetstream.consumer",
			ErrStream, c.cfg.Consumer, c.cfg.Stream)
	case err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, nil, err
	}
	cc := c.consumerConfig()
	if existed {
		c.keepStart(&cc, prev.CachedInfo().Config)
		if n := prev.CachedInfo().Config.MaxDeliver; n > 0 {
			c.log.Warn("jetstream: the consumer's max_deliver was set on the server: past it the server gives up on a message, never decided, with no audit record; replayguard sets it back to unlimited",
				"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "max_deliver", n, "when", "bind")
		}
		if err := c.sharedFilter(prev.CachedInfo().Config); err != nil {
			return nil, nil, err
		}
	} else if held, err := c.holdsDecisions(ctx); err != nil {
		return nil, nil, err
	} else if held {
		// Another member may have created it meanwhile, and decided: the
		// group starting at once. Bound again, it is found.
		if _, err := st.Consumer(ctx, c.cfg.Consumer); err == nil {
			return nil, nil, fmt.Errorf("durable consumer %q on stream %q was created by another member while this one bound: binding again", c.cfg.Consumer, c.cfg.Stream)
		}
		return nil, nil, c.missing(stood, known)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, cc)
	if errors.Is(err, jetstream.ErrConsumerMultipleFilterSubjectsNotSupported) {
		return nil, nil, fmt.Errorf("%w: consumer %q on stream %q: %d subjects need nats-server 2.10 or later: %v",
			ErrStream, c.cfg.Consumer, c.cfg.Stream, len(c.cfg.Subjects), err)
	}
	if err != nil {
		var api *jetstream.APIError
		switch {
		case !errors.As(err, &api):
		case strings.Contains(api.Description, "can not be updated"): // nats-server 2.9 says so with code 500
			return nil, nil, fmt.Errorf("%w: consumer %q on stream %q exists with a setting the server cannot change (%s): delete it, or name another jetstream.consumer",
				ErrStream, c.cfg.Consumer, c.cfg.Stream, api.Description)
		case api.Code >= http.StatusBadRequest && api.Code < http.StatusInternalServerError && api.Code != http.StatusRequestTimeout:
			return nil, nil, fmt.Errorf("%w: consumer %q on stream %q: %s", ErrStream, c.cfg.Consumer, c.cfg.Stream, api.Description)
		}
		return nil, nil, err
	}
	// Read again, not taken from the answer to the create: nats-server
	// 2.9 answers it, for a durable that exists, with the state it loaded
	// the consumer with (at its own start), which a restart since leaves
	// behind: an ack floor that old would tell messages decided and
	// acknowledged since, and removed, as lost.
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, nil, err
	}
	if c.cfg.Alone && info.NumWaiting > 0 {
		return nil, nil, fmt.Errorf("%w: consumer %q on stream %q: the server holds %d pull requests of another client, and this store admits no other member: "+
			"a second replayguard run on the same jetstream.consumer with a store of its own? each would decide only the part of the stream the server deals it; "+
			"waiting until it stops (a group shares a durable on a postgres or redis store, each member with a store.member of its own)",
			errAnotherClient, c.cfg.Consumer, c.cfg.Stream, info.NumWaiting)
	}
	// The stream's first sequence read after the consumer's ack floor: a
	// purge between the two shows in it, never only in the floor it moved.
	si, err := st.Info(ctx)
	if err != nil {
		return nil, nil, err
	}
	first := si.State.FirstSeq
	c.streamCreated = si.Created
	c.end.reset()
	c.end.note(si.State.LastSeq, time.Now().UTC())
	// What lies before the consumer's own start was never to be delivered:
	// not lost, and never to be delivered again.
	c.startFloor = startBefore(info, first)
	if known {
		c.startsPast(stood, first, si.State.LastSeq)
	}
	c.noteFloor(info)
	c.accounted = max(c.accounted, c.startFloor)
	if existed && marked && si.Created.Equal(mark.Created) {
		c.purgedWhileStopped(mark, first, info.AckFloor.Stream)
	}
	gaveUp := existed && prev.CachedInfo().Config.MaxDeliver > 0
	c.owed.reset(info.AckFloor.Stream, info.Delivered.Stream,
		uint64(max(info.NumAckPending, 0))+c.skippedOver(ctx, st, si, info.AckFloor.Stream, info.Delivered.Stream, gaveUp))
	if existed { // nothing of this process in flight: from the ack floor, so that a message delivered and never acknowledged counts
		c.removedAhead(first, info.AckFloor.Stream)
	}
	c.accounted = max(c.accounted, info.AckFloor.Stream, preceding(first))
	c.receipts.reset(c.accounted, info.Delivered.Consumer)
	c.verified, c.lastReading, c.deliveredBefore = info.Delivered.Consumer, nil, info.Delivered.Stream
	c.keepMark(ctx, engine.StreamMark{Created: si.Created, Decided: c.accounted, End: si.State.LastSeq})
	verb := "jetstream consumer bound"
	if !existed {
		verb = "jetstream consumer created: delivering the stream from its first message"
	}
	c.log.Info(verb, "stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "pending", info.NumPending,
		"ack_pending", info.NumAckPending, "redelivered", info.NumRedelivered, "acked_through", info.AckFloor.Stream)
	c.noteUnheld(info, 0)
	return cons, si.Config.Subjects, nil
}

// missing is bindOnce's refusal of a consumer missing on a store that
// holds decisions, saying where to create it: after the ack floor this
// store last read of the stream (stood, when known), from its first
// message when it decided none of it (a stream created again since:
// its sequences start over), else at the sequence after the last one
// decided, for the operator to find.
func (c *Consumer) missing(stood engine.StreamMark, known bool) error {
	refused := fmt.Sprintf("durable consumer %q is missing on stream %q, and the store already holds decisions (this member's, or on a group's store another member's: it was deleted, or the stream created again, or jetstream.consumer renamed): "+
		"a new one would deliver the stream from its first message, where messages whose keys have left the window (window.ttl) apply again. ", c.cfg.Consumer, c.cfg.Stream)
	add := fmt.Sprintf("nats consumer add %s %s --pull --ack explicit", c.cfg.Stream, c.cfg.Consumer)
	switch {
	case known && stood.Decided == 0:
		refused += fmt.Sprintf("This store decided no message of the stream as it is now (created at %s): create it from the stream's first message, e.g. %s --deliver all "+
			"(what was decided of a stream of that name before is found duplicate while its keys are in the window, window.ttl)", stood.Created.UTC().Format(time.RFC3339), add)
	case known:
		refused += fmt.Sprintf("Create it after the ack floor this store last read of the stream, at %s: e.g. %s --deliver %d (what was decided after it is found duplicate while its keys are in the window, window.ttl)",
			stood.At.UTC().Format(time.RFC3339), add, stood.Decided+1)
	default:
		refused += fmt.Sprintf("Create it first, where it should start: e.g. %s --deliver SEQ (the stream sequence after the last one decided; "+
			"what comes again is found duplicate), or --deliver all to take the whole stream again", add)
	}
	return fmt.Errorf("%w: %s", ErrStream, refused)
}

// holdsDecisions reports whether the store holds decisions: this
// member's, or on a group's store any member's.
func (c *Consumer) holdsDecisions(ctx context.Context) (bool, error) {
	switch d := c.dec.(type) {
	case nil:
		return false, nil
	case groupDecider:
		held, err := d.HoldsDecisions(ctx)
		if err != nil {
			return false, fmt.Errorf("read whether the store holds decisions: %w", err)
		}
		return held, nil
	}
	return c.dec.Stats().Position > 0, nil
}

// sharedFilter refuses, on a group's store, to bind a durable consumer
// the members share when this member's jetstream.subjects would change its
// filter: the server delivers every member what the filter takes, so one
// member's narrower subjects would leave the others' messages to no
// member, with no sign anywhere, and a wider one would flip the filter
// back and forth with each member's bind. A consumer's other settings
// (ack_wait, max_ack_pending) are the group's too: a change is logged, as
// it applies to every member.
func (c *Consumer) sharedFilter(was jetstream.ConsumerConfig) error {
	if c.cfg.Alone {
		return nil
	}
	// As written, not as the stream's subjects now make them: a durable
	// without a filter takes the subjects the stream gains, one filtered
	// to the stream's subjects of today does not.
	have := filterSubjects(was.FilterSubject, was.FilterSubjects, nil)
	want := filterSubjects("", c.cfg.Subjects, nil)
	if !sameSubjects(have, want) {
		if have == nil {
			have = []string{"every subject of the stream (no filter)"}
		}
		if want == nil {
			want = []string{"every subject of the stream (no filter)"}
		}
		return fmt.Errorf("%w: consumer %q on stream %q, which the group's members share, takes %s, and this member's jetstream.subjects take %s: "+
			"every member must take the same subjects (a member's filter is every member's: the messages it leaves out would go to no member). "+
			"To change them, stop every member, change the consumer's filter on the server (nats consumer edit), then start them with the new jetstream.subjects",
			ErrStream, c.cfg.Consumer, c.cfg.Stream, strings.Join(have, ", "), strings.Join(want, ", "))
	}
	if was.AckWait != c.cfg.AckWait || was.MaxAckPending != c.cfg.MaxAckPending {
		c.log.Warn("jetstream: this member's ack_wait or max_ack_pending differs from the consumer the group's members share, and changes it for every member: give every member the same",
			"stream", c.cfg.Stream, "consumer", c.cfg.Consumer, "ack_wait_was", was.AckWait, "ack_wait", c.cfg.AckWait,
			"max_ack_pending_was", was.MaxAckPending, "max_ack_pending", c.cfg.MaxAckPending)
	}
	return nil
}

// sameSubjects reports whether a and b hold the same subject filters,
// whatever their order.
func sameSubjects(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// consumerConfig is the durable consumer: explicit acks, every message of
// the stream on first creation, never given up on.
func (c *Consumer) consumerConfig() jetstream.ConsumerConfig {
	cc := jetstream.ConsumerConfig{
		Durable:       c.cfg.Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       c.cfg.AckWait,
		MaxAckPending: c.cfg.MaxAckPending,
		MaxDeliver:    -1,
	}
	switch len(c.cfg.Subjects) {
	case 0:
	case 1: // FilterSubject works on nats-server 2.9 too
		cc.FilterSubject = c.cfg.Subjects[0]
	default:
		cc.FilterSubjects = c.cfg.Subjects
	}
	return cc
}

// keepStart keeps, in cc, where the existing consumer was made to start:
// the server cannot change it, and it only ever mattered at its creation.
// An operator who creates the durable at a chosen position (after one was
// deleted, `nats consumer add --deliver SEQ`, rather than have a new one
// deliver the stream again from its first message) has it bound, not
// refused.
func (c *Consumer) keepStart(cc *jetstream.ConsumerConfig, was jetstream.ConsumerConfig) {
	if !startOf(cc, was) {
		return
	}
	c.log.Info("jetstream consumer made elsewhere to start past the stream's first message: bound as it is", "stream", c.cfg.Stream,
		"consumer", c.cfg.Consumer, "deliver_policy", was.DeliverPolicy.String(), "start_sequence", was.OptStartSeq)
}

// startOf sets, in cc, where was starts, and reports whether that differs
// from cc's own: every update of an existing consumer keeps it, for the
// server refuses to change it ("deliver policy can not be updated").
func startOf(cc *jetstream.ConsumerConfig, was jetstream.ConsumerConfig) bool {
	if was.DeliverPolicy == cc.DeliverPolicy {
		return false
	}
	cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime = was.DeliverPolicy, was.OptStartSeq, was.OptStartTime
	return true
}
