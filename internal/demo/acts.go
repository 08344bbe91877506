package demo

import (
	"context"
	"path/filepath"
)

// play runs the story's acts.
func (d *demo) play(ctx context.Context) error {
	if d.story.paths {
		return d.playPaths(ctx)
	}
	for _, act := range []func(context.Context) error{d.subscribe, d.holdMessages, d.checkpoint, d.deliver, d.failOver, d.continueOnStandby} {
		if err := act(ctx); err != nil {
			return err
		}
	}
	return nil
}

// subscribe creates both consumers' persistent sessions on the primary,
// and the dispatch board's on the COP broker.
func (d *demo) subscribe(ctx context.Context) error {
	if err := d.startConsumers(); err != nil {
		return err
	}
	if err := d.waitOn(ctx, d.links[0].URL(), "subscribe on the primary"); err != nil {
		return err
	}
	if d.board == nil {
		d.out.say("both consumers subscribed to %s on the primary, QoS 1", d.story.filter)
	} else {
		if err := d.wait(ctx, "the dispatch board to subscribe on the COP broker", func() bool { return d.boardT.on(d.cop.URL()) }); err != nil {
			return err
		}
		d.out.say("both consumers subscribed to %s on the primary, the dispatch board to %s on the COP broker, QoS 1", d.story.filter, cleanFilter)
	}
	d.out.more("persistent sessions: MQTT 5, clean start off, session expiry 1h")
	return d.pause(ctx)
}

// holdMessages publishes the first messages while the consumers are cut
// off: the primary keeps them in their sessions.
func (d *demo) holdMessages(ctx context.Context) error {
	d.links[0].cut()
	d.out.say("%s down: both consumers cut off; the primary keeps their %ss in their sessions", d.story.link, d.story.noun)
	if err := d.pause(ctx); err != nil {
		return err
	}
	return d.publish(ctx, d.primary, d.story.held, "")
}

// checkpoint copies the primary's session store for the standby while it
// holds the messages unacknowledged.
func (d *demo) checkpoint(ctx context.Context) error {
	consumers := []string{naiveClientID, d.guard.clientID()}
	if err := d.wait(ctx, "the primary to see both consumers gone", func() bool { return !d.primary.online(consumers...) }); err != nil {
		return err
	}
	copyDir := filepath.Join(d.dir, "standby")
	if err := d.primary.checkpoint(copyDir); err != nil {
		return err
	}
	held, err := inflightBySession(copyDir)
	if err != nil {
		return err
	}
	d.out.say("primary checkpoint: it stops a moment, its session store is copied for the standby, it restarts")
	d.out.more("the copy holds %s unacknowledged in the naive consumer's session, %d in replayguard's",
		plural(held[naiveClientID], d.story.noun), held[d.guard.clientID()])
	if d.story.restarted != nil {
		d.story.restarted(d)
	}
	return d.pause(ctx)
}

// deliver restores the link: the consumers apply and acknowledge the held
// messages, then the story goes on.
func (d *demo) deliver(ctx context.Context) error {
	d.links[0].connect(d.primary.addr)
	noun := d.story.noun
	if err := d.waitHandled(ctx, d.story.held, "the held "+noun+"s to reach both consumers"); err != nil {
		return err
	}
	n, g := d.naiveT.from(d.links[0].URL()), d.guardT.from(d.links[0].URL())
	d.out.say("%s up: both consumers get the %s held, apply and acknowledge them", d.story.link, plural(len(d.story.held), noun))
	d.out.more("DUP=1 on %d (naive) and %d (replayguard) of them, though none was delivered before", n.firstDup, g.firstDup)
	if err := d.sayCleanHeld(ctx); err != nil {
		return err
	}
	if err := d.pause(ctx); err != nil {
		return err
	}
	if err := d.publish(ctx, d.primary, d.story.live, ""); err != nil {
		return err
	}
	if err := d.waitHandled(ctx, d.story.live, "the "+noun+"s to reach both consumers"); err != nil {
		return err
	}
	if err := d.guard.drainForward(ctx); err != nil {
		return err
	}
	return d.waitClean(ctx, d.story.live, "the "+noun+"s to reach the dispatch board")
}

// sayCleanHeld waits for the held reports on the clean stream and tells
// how they look there.
func (d *demo) sayCleanHeld(ctx context.Context) error {
	if d.board == nil {
		return nil
	}
	if err := d.waitClean(ctx, d.story.held, "the held reports to reach the dispatch board"); err != nil {
		return err
	}
	c := d.cleanCounts()
	d.out.say("clean stream: replayguard's outbox forwards the %s after their commit; the dispatch board receives %s of %d keys, applies %d",
		plural(len(d.story.held), "report"), copies(c.copies), c.keys, c.keys)
	if s := d.board.first(); s != nil {
		d.out.more("a copy is the report's own bytes on %s, with MQTT 5 user properties", s.topic)
		d.out.more("%s", describeProperties(s.user))
	}
	return nil
}

// failOver crashes the primary and promotes the standby from the
// checkpoint, which predates the consumers' acknowledgements.
func (d *demo) failOver(ctx context.Context) error {
	before := d.cleanCounts()
	d.primary.fail()
	d.out.say("the primary fails: listener and connections cut, no DISCONNECT")
	if err := d.pause(ctx); err != nil {
		return err
	}
	var err error
	if d.standby, err = d.startBroker("standby"); err != nil { // on the checkpoint's copy
		return err
	}
	standby := d.links[1].URL()
	resends := []resend{d.naiveResend(d.standby, standby), d.guardResend(d.standby, standby)} // before the link is up
	d.links[1].connect(d.standby.addr)
	d.out.say("standby promoted at %s from the checkpoint; the consumers fail over to it", d.standby.URL())
	d.out.more("its sessions still hold %ss the consumers have applied and acknowledged since", d.story.noun)
	if err := d.waitOn(ctx, standby, "reconnect to the standby"); err != nil {
		return err
	}
	if err := d.waitResent(ctx, resends...); err != nil {
		return err
	}
	n, g := d.naiveT.from(standby), d.guardT.from(standby)
	d.out.say("naive consumer: the standby resends %s (%d with DUP=1), %d already applied: applied again",
		plural(n.deliveries, d.story.noun), n.dup, n.replays)
	dups, _ := d.guardT.outcome("duplicate")
	d.out.say("replayguard:    the standby resends %s (%d with DUP=1), %d already applied: %d duplicate, none applied again",
		plural(g.deliveries, d.story.noun), g.dup, g.replays, dups)
	if d.story.replayed != nil {
		d.story.replayed(d, n)
	}
	if err := d.guard.drainForward(ctx); err != nil {
		return err
	}
	if d.board != nil {
		if err := d.waitQuietClean(ctx); err != nil {
			return err
		}
		d.sayCleanSince(before)
	}
	return d.pause(ctx)
}

// continueOnStandby publishes the rest of the story on the standby.
func (d *demo) continueOnStandby(ctx context.Context) error {
	if err := d.publish(ctx, d.standby, d.story.after, "  (on the standby)"); err != nil {
		return err
	}
	if err := d.waitHandled(ctx, d.story.after, "the last "+d.story.noun+" to reach both consumers"); err != nil {
		return err
	}
	if err := d.waitQuiet(ctx); err != nil {
		return err
	}
	if err := d.guard.drainForward(ctx); err != nil {
		return err
	}
	if err := d.waitClean(ctx, d.story.after, "the last report to reach the dispatch board"); err != nil {
		return err
	}
	if d.board != nil {
		if err := d.waitQuietClean(ctx); err != nil {
			return err
		}
	}
	d.out.say("story over")
	return nil
}
