package demo

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// startConsumers starts both consumers of the feed and the dispatch board.
func (d *demo) startConsumers() error {
	if d.board != nil {
		if err := d.board.start(); err != nil {
			return err
		}
	}
	if err := d.naive.start(); err != nil {
		return err
	}
	d.guard.start()
	return nil
}

// stopConsumers disconnects both consumers cleanly, then stops
// replayguard's drainer and the dispatch board; their sessions stay.
func (d *demo) stopConsumers() {
	if d.naive != nil {
		d.naive.stop()
	}
	if d.guard != nil {
		if err := d.guard.stop(); err != nil {
			d.log.Warn("replayguard's consumer stopped with an error", "err", err)
		}
	}
	if d.board != nil {
		d.board.stop()
	}
}

// publish sends msgs from the story's producer through b, narrating each
// message that says something and pausing after it. The connection ends
// with the act, unless the story keeps it (story.connected): then it stays
// open until the broker ends it or the next act opens a new one.
func (d *demo) publish(ctx context.Context, b *broker, msgs []feedMsg, suffix string) error {
	d.closeProducer()
	p, err := dialPublisher(ctx, b.addr, d.story.producer)
	if err != nil {
		return err
	}
	if d.story.connected {
		d.producer = p
	} else {
		defer p.close()
	}
	for _, m := range msgs {
		if err := p.send(ctx, m); err != nil {
			return err
		}
		if m.says == "" {
			continue
		}
		d.out.say("%-17s%s%s", m.label, m.says, suffix)
		if err := d.pause(ctx); err != nil {
			return err
		}
	}
	return nil
}

// closeProducer closes the producer's kept connection, if any.
func (d *demo) closeProducer() {
	if d.producer != nil {
		d.producer.close()
		d.producer = nil
	}
}

func (d *demo) pause(ctx context.Context) error {
	t := time.NewTimer(d.opts.Pace)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait polls cond until it holds, the step times out, replayguard's
// consumer fails or ctx is done.
func (d *demo) wait(ctx context.Context, what string, cond func() bool) error {
	deadline := time.Now().Add(stepTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if err := d.guard.failed(); err != nil {
			return fmt.Errorf("%w: replayguard's consumer: %w", ErrStalled, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: waited %v for %s", ErrStalled, stepTimeout, what)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// waitOn waits until both consumers are connected to broker and subscribed.
func (d *demo) waitOn(ctx context.Context, broker, what string) error {
	return d.wait(ctx, "both consumers to "+what, func() bool {
		return d.naiveT.on(broker) && d.guardT.connectedTo(broker) && d.guard.consumer.Ready()
	})
}

// waitHandled waits until both consumers handled every message at least
// once.
func (d *demo) waitHandled(ctx context.Context, msgs []feedMsg, what string) error {
	return d.wait(ctx, what, func() bool { return d.naiveT.hasAll(msgs) && d.guardT.hasAll(msgs) })
}

// waitQuiet waits until neither consumer has anything in hand nor received
// anything for a moment. It cannot tell a resend still to come from none:
// after a failover, waitResent waits for what the sessions held.
func (d *demo) waitQuiet(ctx context.Context) error {
	settle := d.settle()
	return d.wait(ctx, "the deliveries to settle", func() bool { return d.naiveT.quiet(settle) && d.guardT.quiet(settle) })
}

// resend is what a consumer will have handled from a broker once the
// broker has resent what the consumer's session there holds, as it does
// when the consumer takes the session up.
type resend struct {
	who    string // "the naive consumer"
	tally  *tally
	broker string // the URL the consumer reaches the broker at
	want   int    // deliveries from broker: those before, and each one held
}

// naiveResend reads what b holds in the naive consumer's session; the
// consumer reaches b at url. It is read before the consumer can reach b:
// once the consumer takes the session up, b resends and acknowledgements
// empty it.
func (d *demo) naiveResend(b *broker, url string) resend {
	return resend{who: "the naive consumer", tally: d.naiveT, broker: url,
		want: d.naiveT.from(url).deliveries + b.inflight(naiveClientID)}
}

// guardResend reads what b holds in replayguard's session, as naiveResend
// does; its deliveries count once decided and committed.
func (d *demo) guardResend(b *broker, url string) resend {
	return resend{who: "replayguard", tally: d.guardT, broker: url,
		want: d.guardT.from(url).deliveries + b.inflight(d.guard.clientID())}
}

// waitResent waits until each consumer has handled what its session held
// on the broker. Waiting for quiet would not do: a consumer whose session
// is found counts as subscribed before the broker resends a thing, and
// nothing had arrived for longer than the settling time.
func (d *demo) waitResent(ctx context.Context, resends ...resend) error {
	for _, r := range resends {
		what := fmt.Sprintf("%s to handle %s from %s, the resend of its session there included",
			r.who, plural(r.want, d.story.noun), r.broker)
		if err := d.wait(ctx, what, func() bool { return r.tally.from(r.broker).deliveries >= r.want }); err != nil {
			return err
		}
	}
	return nil
}

// waitClean waits until the dispatch board received every report at least
// once on the clean stream; at once without a board.
func (d *demo) waitClean(ctx context.Context, msgs []feedMsg, what string) error {
	if d.board == nil {
		return nil
	}
	return d.wait(ctx, what, func() bool { return d.boardT.hasAll(msgs) })
}

// waitQuietClean waits until the dispatch board has nothing in hand nor
// received anything for a moment.
func (d *demo) waitQuietClean(ctx context.Context) error {
	settle := d.settle()
	return d.wait(ctx, "the clean stream to settle", func() bool { return d.boardT.quiet(settle) })
}

// settle is how long nothing must arrive before the deliveries count as
// settled.
func (d *demo) settle() time.Duration {
	return min(max(d.opts.Pace/2, 150*time.Millisecond), 400*time.Millisecond)
}

// cleanCounts are the dispatch board's copies so far, by outcome.
func (d *demo) cleanCounts() cleanCounts {
	keys, _ := d.boardT.outcome(boardApplied)
	repeats, _ := d.boardT.outcome(boardRepeat)
	unkeyed, _ := d.boardT.outcome(boardUnkeyed)
	invalid, _ := d.boardT.outcome(boardInvalid)
	return cleanCounts{copies: d.boardT.total().deliveries, keys: keys, repeats: repeats, unkeyed: unkeyed, invalid: invalid}
}

// sayCleanSince tells what reached the dispatch board since before.
func (d *demo) sayCleanSince(before cleanCounts) {
	c := d.cleanCounts()
	n, repeats := c.copies-before.copies, c.repeats-before.repeats
	if n == 0 {
		d.out.say("dispatch board: no copy on the clean stream meanwhile: replayguard forwards what it applies, and it applied no replay")
		return
	}
	d.out.say("dispatch board: %s on the clean stream meanwhile; %d of them under keys it had applied, skipped", copies(n), repeats)
}

// stopFeed stops the producer, the consumers and the brokers; the
// dashboard stays.
func (d *demo) stopFeed() {
	d.closeProducer()
	d.stopConsumers()
	if d.standby != nil {
		d.standby.close()
	}
	if d.pathB != nil {
		d.pathB.close()
	}
	if d.primary != nil {
		d.primary.close()
	}
	if d.cop != nil {
		d.cop.close()
	}
	for _, l := range d.links {
		l.close()
	}
	d.links = nil
}

// shutdown stops whatever is still running: consumers, brokers, the
// dashboard, then the engine and its store.
func (d *demo) shutdown() {
	d.stopFeed()
	if d.stopWeb != nil {
		d.stopWeb()
		if err := <-d.webDone; err != nil {
			d.log.Warn("dashboard stopped with an error", "err", err)
		}
	}
	if d.guard != nil {
		d.guard.close()
	}
}

// brokerLog passes on only the brokers' errors: they log every start and
// stop at info level, and every dropped connection (which the story
// causes on purpose) as a warning.
func brokerLog(log *slog.Logger) *slog.Logger {
	return slog.New(levelFloor{log.Handler(), slog.LevelError})
}

type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFloor) WithAttrs(as []slog.Attr) slog.Handler {
	return levelFloor{h.Handler.WithAttrs(as), h.min}
}

func (h levelFloor) WithGroup(name string) slog.Handler {
	return levelFloor{h.Handler.WithGroup(name), h.min}
}
