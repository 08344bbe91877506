package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// playPaths runs the acts of a story on two paths: the naive console's
// session on path b from before the story; both consumers subscribing;
// the first reports on both paths; path a's primary dying; the rest on
// path b alone.
func (d *demo) playPaths(ctx context.Context) error {
	for _, act := range []func(context.Context) error{d.naiveOnPathB, d.subscribePaths, d.publishOnBoth, d.pathAFails, d.publishWhileADown} {
		if err := act(ctx); err != nil {
			return err
		}
	}
	return nil
}

// naiveOnPathB gives the naive console the session on path b that a
// console with a broker list gathers: path a is down when it starts, so it
// subscribes on b; when a is back and b's link drops, it returns to a, its
// first broker, and b keeps its session, queuing every report for it.
func (d *demo) naiveOnPathB(ctx context.Context) error {
	if err := d.naive.start(); err != nil {
		return err
	}
	a, b := d.links[0].URL(), d.links[1].URL()
	if err := d.wait(ctx, "the naive consumer to subscribe on path b", func() bool { return d.naiveT.on(b) }); err != nil {
		return err
	}
	d.out.say("earlier, path a down for maintenance: the naive consumer subscribed to %s on b, its second broker", d.story.filter)
	d.out.more("a persistent session: MQTT 5, clean start off, session expiry 1h")
	if err := d.pause(ctx); err != nil {
		return err
	}
	d.links[0].connect(d.primary.addr)
	d.links[1].cut()
	if err := d.wait(ctx, "the naive consumer to subscribe on path a", func() bool { return d.naiveT.on(a) }); err != nil {
		return err
	}
	d.links[1].connect(d.pathB.addr)
	d.out.say("path a back, b's link drops a moment: the naive consumer returns to a, its first broker, and subscribes")
	d.out.more("b keeps its old session, and queues each report for it from now on")
	return d.pause(ctx)
}

// subscribePaths starts replayguard on both paths at once.
func (d *demo) subscribePaths(ctx context.Context) error {
	fa, fb := d.guard.feeds.named(feedA), d.guard.feeds.named(feedB)
	if fa == nil || fb == nil {
		return fmt.Errorf("%w: replayguard's configuration lacks feed %s or %s", ErrOptions, feedA, feedB)
	}
	d.guard.start()
	a, b := d.links[0].URL(), d.links[1].URL()
	if err := d.wait(ctx, "replayguard to subscribe on both paths", func() bool { return fa.on(a) && fb.on(b) }); err != nil {
		return err
	}
	d.out.say("replayguard subscribed to %s on both paths at once, QoS 1: feed a on a, feed b on b", d.story.filter)
	return d.pause(ctx)
}

// publishOnBoth publishes the first reports to path a, then to path b,
// each copy once the one before it was handled: a's is the first, b's its
// twin.
func (d *demo) publishOnBoth(ctx context.Context) error {
	pa, err := dialPublisher(ctx, d.primary.addr, d.story.producer)
	if err != nil {
		return err
	}
	defer pa.close()
	pb, err := dialPublisher(ctx, d.pathB.addr, d.story.producer)
	if err != nil {
		return err
	}
	defer pb.close()
	b := d.links[1].URL()
	twins := d.guardT.from(b).deliveries
	for _, m := range d.story.held {
		if err := d.sendAndWait(ctx, pa, m, func() bool { return d.naiveT.hasAll([]feedMsg{m}) && d.guardT.hasAll([]feedMsg{m}) }); err != nil {
			return err
		}
		twins++
		if err := d.sendAndWait(ctx, pb, m, func() bool { return d.guardT.from(b).deliveries >= twins }); err != nil {
			return err
		}
		d.out.say("%-17s%s  (to a, then b)", m.label, m.says)
		if err := d.pause(ctx); err != nil {
			return err
		}
	}
	if err := d.sayFeeds(ctx, "replayguard's audit records: "); err != nil {
		return err
	}
	d.out.more("a delivered each report first: applied; b's copy came second: its twin, duplicate")
	held := len(d.story.held)
	if err := d.wait(ctx, "path b to queue the reports in the naive consumer's old session", func() bool {
		return d.pathB.inflight(naiveClientID) >= held
	}); err != nil {
		return err
	}
	d.out.say("path b holds %s for the naive consumer's old session, unacknowledged", plural(d.pathB.inflight(naiveClientID), d.story.noun))
	return d.pause(ctx)
}

// sendAndWait publishes m through p and waits until handled holds.
func (d *demo) sendAndWait(ctx context.Context, p *publisher, m feedMsg, handled func() bool) error {
	if err := p.send(ctx, m); err != nil {
		return err
	}
	return d.wait(ctx, m.label+" to be handled", handled)
}

// pathAFails crashes path a's primary, which has no standby: the naive
// consumer fails over to b, its old session there resending what it
// applied; replayguard goes on, on feed b.
func (d *demo) pathAFails(ctx context.Context) error {
	a, b := d.links[0].URL(), d.links[1].URL()
	resend := d.naiveResend(d.pathB, b) // before the naive consumer takes its session there up
	d.primary.fail()
	d.out.say("the primary of path a fails: listener and connections cut, no DISCONNECT; path a has no standby")
	if err := d.wait(ctx, "the naive consumer to fail over to path b", func() bool { return d.naiveT.on(b) }); err != nil {
		return err
	}
	if err := d.waitResent(ctx, resend); err != nil {
		return err
	}
	n := d.naiveT.from(b)
	d.out.say("naive consumer: fails over to b; its old session there resends %s (%d with DUP=1), %d already applied: applied again",
		plural(n.deliveries, d.story.noun), n.dup, n.replays)
	fa, fb := d.guard.feeds.named(feedA), d.guard.feeds.named(feedB)
	if err := d.wait(ctx, "replayguard's feed a to notice", func() bool { return !fa.on(a) && fb.on(b) && d.guard.ready() }); err != nil {
		return err
	}
	d.out.say("replayguard:    feed a down, retrying a; feed b connected and committing: replayguard stays ready")
	return d.pause(ctx)
}

// publishWhileADown publishes the rest of the story while path a is down:
// a refuses the gateway, b takes each report. It measures how soon
// replayguard applied each one, from its audit records.
func (d *demo) publishWhileADown(ctx context.Context) error {
	if pa, err := dialPublisher(ctx, d.primary.addr, d.story.producer); err == nil {
		pa.close()
		return fmt.Errorf("%w: path a's dead primary took a connection", ErrStalled)
	}
	d.out.say("the field gateway publishes on: a refuses its connection, b takes each report")
	pb, err := dialPublisher(ctx, d.pathB.addr, d.story.producer)
	if err != nil {
		return err
	}
	defer pb.close()
	sent := map[msgID]time.Time{}
	for _, m := range d.story.live {
		sent[m.id] = time.Now()
		if err := d.sendAndWait(ctx, pb, m, func() bool { return d.naiveT.hasAll([]feedMsg{m}) && d.guardT.hasAll([]feedMsg{m}) }); err != nil {
			return err
		}
		d.out.say("%-17s%s  (b alone)", m.label, m.says)
		if err := d.pause(ctx); err != nil {
			return err
		}
	}
	if err := d.waitQuiet(ctx); err != nil {
		return err
	}
	return d.sayFresh(ctx, sent)
}

// sayFresh tells how soon after its publication replayguard applied each
// report published while path a was down, and from which feed.
func (d *demo) sayFresh(ctx context.Context, sent map[msgID]time.Time) error {
	var late time.Duration
	from := map[string]int{}
	err := d.eachRecord(ctx, func(r engine.AuditRecord) {
		id := recordID(r)
		if id == nil || (r.Outcome != "applied" && r.Outcome != "applied_late") {
			return
		}
		if at, ok := sent[*id]; ok {
			late = max(late, r.Time.Sub(at))
			from[r.Feed]++
		}
	})
	if err != nil {
		return err
	}
	n := len(d.story.live)
	if from[feedB] == n {
		d.freshWithin = late
		d.out.say("replayguard never went stale while path a was down: the %s published then were applied from feed b",
			plural(n, d.story.noun))
		d.out.more("within %s of their publication", roundMS(late))
	} else {
		d.out.say("replayguard applied %d of the %s published while path a was down from feed b", from[feedB], plural(n, d.story.noun))
	}
	d.out.say("story over")
	return nil
}

// roundMS shows d in whole milliseconds, at least 1.
func roundMS(d time.Duration) string {
	return fmt.Sprintf("%d ms", max(1, d.Round(time.Millisecond).Milliseconds()))
}
