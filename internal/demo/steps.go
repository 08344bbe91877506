package demo

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// startConsumers starts both consumers of the feed and the dispatch board.
func (d *demo) startConsumers() error {
	if err := d.board.start(); err != nil {
		return err
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

// publish sends reports from the field gateway through b, one per pace.
func (d *demo) publish(ctx context.Context, b *broker, reports []report, suffix string) error {
	p, err := dialPublisher(ctx, b.addr)
	if err != nil {
		return err
	}
	defer p.close()
	for _, r := range reports {
		if err := p.send(ctx, r); err != nil {
			return err
		}
		d.out.say("%-17s%s%s", r.label(), r.says, suffix)
		if err := d.pause(ctx); err != nil {
			return err
		}
	}
	return nil
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

// waitHandled waits until both consumers handled every report at least once.
func (d *demo) waitHandled(ctx context.Context, rs []report, what string) error {
	return d.wait(ctx, what, func() bool { return d.naiveT.hasAll(rs) && d.guardT.hasAll(rs) })
}

// waitQuiet waits until neither consumer has anything in hand nor received
// anything for a moment: the brokers have resent all they had to.
func (d *demo) waitQuiet(ctx context.Context) error {
	settle := d.settle()
	return d.wait(ctx, "the deliveries to settle", func() bool { return d.naiveT.quiet(settle) && d.guardT.quiet(settle) })
}

// waitClean waits until the dispatch board received every report at least
// once on the clean stream.
func (d *demo) waitClean(ctx context.Context, rs []report, what string) error {
	return d.wait(ctx, what, func() bool { return d.boardT.hasAll(rs) })
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

// stopFeed stops the consumers and the brokers; the dashboard stays.
func (d *demo) stopFeed() {
	d.stopConsumers()
	if d.standby != nil {
		d.standby.close()
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

// conclude prints the pictures side by side and what each consumer did.
func (d *demo) conclude() *result {
	res := &result{naive: d.naive.picture(), guard: d.guard.picture(), board: d.board.picture(), truth: d.story.truth(),
		forwarded: int(d.guard.forwarded()), clean: d.cleanCounts()}
	res.rows = rows(res.naive, res.guard, res.board, res.truth)
	n, g := d.naiveT.total(), d.guardT.total()
	res.naiveReplays = n.replays
	var dup int
	res.duplicates, dup = d.guardT.outcome("duplicate")
	res.dupZero = res.duplicates - dup
	applied, _ := d.guardT.outcome("applied")
	late, _ := d.guardT.outcome("applied_late")
	res.applied = applied + late

	d.out.plain("\nThe common operating picture after the failover:\n")
	printTable(d.out.w, res.rows)
	d.out.plain("")
	d.out.plain("  naive consumer: %s delivered, %d of them replays it applied again", plural(n.deliveries, "report"), n.replays)
	d.out.plain("  replayguard:    %s delivered: %d applied, %d duplicate; %s forwarded, each PUBACKed by the COP broker",
		plural(g.deliveries, "report"), res.applied, res.duplicates, copies(res.forwarded))
	d.out.plain("  replayguard suppressed %s as duplicates (%d arrived with DUP=0)", plural(res.duplicates, "replay"), res.dupZero)
	d.out.plain("  DUP=1 also marked %d first deliveries: the flag proves nothing either way", g.firstDup)
	d.sayClean(res)
	if err := res.verdict(); err != nil {
		d.out.plain("\n  FAILED: %v", err)
	} else {
		d.out.plain("\n  The naive picture is wrong in %d of %d rows; replayguard's and the dispatch board's are exact.",
			wrongRows(res.rows, naiveOf), len(res.rows))
	}
	d.out.plain("  Audit trail: %sapi/v1/audit   Metrics: %smetrics", d.webURL, d.webURL)
	return res
}

// sayClean tells what the dispatch board received on the clean stream:
// at least once from the outbox, exactly once by key.
func (d *demo) sayClean(res *result) {
	c := res.clean
	again := "none sent twice this run"
	if c.repeats > 0 {
		again = fmt.Sprintf("%d sent again by the outbox, skipped by key", c.repeats)
	}
	d.out.plain("  dispatch board: %s on %s, %d distinct keys (%s): each applied report once",
		copies(c.copies), cleanFilter, c.keys, again)
	if c.unkeyed > 0 || c.invalid > 0 {
		d.out.plain("                  %d without a replayguard-key, %d not a report: not applied", c.unkeyed, c.invalid)
	}
	d.out.plain("                  the outbox delivers at least once (a copy whose PUBACK is lost is sent again);")
	d.out.plain("                  keying on replayguard-key makes that exactly once")
}

func naiveOf(r row) string { return r.naive }
func guardOf(r row) string { return r.guard }
func boardOf(r row) string { return r.board }

// verdict is nil when replayguard's picture and the dispatch board's are
// the truth and the naive one is not: the replays were real, replayguard
// caught them, and the clean stream carried each applied report to the
// board, which applied it once.
func (r *result) verdict() error {
	if d := diffs(r.rows, guardOf); d != "" {
		return fmt.Errorf("%w: %s", ErrWrongPicture, d)
	}
	if d := diffs(r.rows, boardOf); d != "" {
		return fmt.Errorf("%w: %s", ErrWrongClean, d)
	}
	if c := r.clean; c.keys != r.applied || c.unkeyed > 0 || c.invalid > 0 {
		return fmt.Errorf("%w: %d distinct keys for %d reports applied (%d copies without a key, %d not a report)",
			ErrWrongClean, c.keys, r.applied, c.unkeyed, c.invalid)
	}
	if wrongRows(r.rows, naiveOf) == 0 {
		return fmt.Errorf("%w: the naive consumer's picture is right (%d replays applied again)", ErrNoReplay, r.naiveReplays)
	}
	return nil
}

// diffs lists the rows where pick differs from the truth, or "".
func diffs(rs []row, pick func(row) string) string {
	var out []string
	for _, w := range rs {
		if v := pick(w); v != w.truth {
			out = append(out, fmt.Sprintf("%s %s = %s, want %s", w.entity, w.field, show(v), show(w.truth)))
		}
	}
	return strings.Join(out, "; ")
}

// hold keeps the dashboard up for Options.Hold, or until ctx is done.
func (d *demo) hold(ctx context.Context) {
	if d.opts.Hold <= 0 {
		return
	}
	d.out.plain("\n  The dashboard stays up at %s for %v (interrupt to stop).", d.webURL, d.opts.Hold)
	t := time.NewTimer(d.opts.Hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
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
