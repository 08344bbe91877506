package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/replayguard/replayguard/audit"
)

// conclude prints the pictures side by side and what each consumer did,
// and verifies replayguard's audit chain.
func (d *demo) conclude(ctx context.Context) *result {
	res := &result{clean: d.board != nil, naive: d.naive.picture(), guard: d.guard.picture(), truth: d.story.truth,
		forwarded: int(d.guard.forwarded()), cleanCounts: d.cleanCounts(), sources: d.guard.eng.Sources()}
	if d.board != nil {
		res.board = d.board.picture()
	}
	res.rows = rows(res.naive, res.guard, res.board, res.truth)
	n, g := d.naiveT.total(), d.guardT.total()
	res.naiveReplays = n.replays
	var dup int
	res.duplicates, dup = d.guardT.outcome("duplicate")
	res.dupZero = res.duplicates - dup
	applied, _ := d.guardT.outcome("applied")
	late, _ := d.guardT.outcome("applied_late")
	res.applied = applied + late
	res.audited, res.auditErr = d.verifyAudit(ctx)

	if d.story.paths {
		res.paths = true
		res.feeds, res.feedsErr = d.feedCounts(ctx)
		res.freshWithin = d.freshWithin
	}

	d.out.plain("\n%s\n", d.story.pictureTitle)
	printTable(d.out.w, res.rows, res.clean, d.story.truthColumn)
	d.out.plain("")
	if d.story.summary != nil {
		d.story.summary(d, res)
	} else {
		d.sayDeliveries(res, n, g)
	}
	if res.clean {
		d.sayClean(res)
	}
	if d.story.notice != nil {
		d.story.notice(d, res)
	}
	d.sayVerdict(res)
	return res
}

// sayDeliveries tells what each consumer was delivered and did with it.
func (d *demo) sayDeliveries(res *result, n, g counts) {
	noun := d.story.noun
	d.out.plain("  naive consumer: %s delivered, %d of them replays it applied again", plural(n.deliveries, noun), n.replays)
	forwarded := ""
	if res.clean {
		forwarded = fmt.Sprintf("; %s forwarded, each PUBACKed by the COP broker", copies(res.forwarded))
	}
	d.out.plain("  replayguard:    %s delivered: %d applied, %d duplicate%s", plural(g.deliveries, noun), res.applied, res.duplicates, forwarded)
	d.out.plain("  replayguard suppressed %s as duplicates (%d arrived with DUP=0)", plural(res.duplicates, "replay"), res.dupZero)
	d.out.plain("  DUP=1 also marked %d first deliveries: the flag proves nothing either way", g.firstDup)
}

// verifyAudit checks replayguard's hash chain from its first record to
// the store's head, as `replayguard audit verify` does.
func (d *demo) verifyAudit(ctx context.Context) (uint64, error) {
	snap, err := d.guard.store.Load(ctx)
	if err != nil {
		return 0, err
	}
	return audit.Verify(ctx, d.guard.store, snap.AuditHead)
}

// sayVerdict tells whether the story proved its point, and where to look.
func (d *demo) sayVerdict(res *result) {
	if err := res.verdict(); err != nil {
		d.out.plain("\n  FAILED: %v", err)
	} else {
		exact := "replayguard's is exact"
		if res.clean {
			exact = "replayguard's and the dispatch board's are exact"
		}
		d.out.plain("\n  The naive picture is wrong in %d of %d rows; %s.", wrongRows(res.rows, naiveOf), len(res.rows), exact)
	}
	if res.auditErr == nil {
		d.out.plain("  Audit chain intact: %d records, one per decision (replayguard audit verify)", res.audited)
	}
	if d.opts.Hold > 0 {
		d.out.plain("  Audit trail: %sapi/v1/audit   Metrics: %smetrics", d.webURL, d.webURL)
		return
	}
	d.out.plain("  The dashboard at %s, its audit trail and metrics stop with the demo: --hold 5m keeps them up", d.webURL)
}

// sayClean tells what the dispatch board received on the clean stream:
// at least once from the outbox, exactly once by key.
func (d *demo) sayClean(res *result) {
	c := res.cleanCounts
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

// verdict is nil when replayguard's picture (and the dispatch board's, with
// a clean stream) is the truth, replayguard's audit chain verifies (and,
// on two paths, its records name both feeds), and the naive picture is not
// the truth: the replays were real, replayguard
// caught them, and the clean stream carried each applied report to the
// board, which applied it once.
func (r *result) verdict() error {
	if d := diffs(r.rows, guardOf); d != "" {
		return fmt.Errorf("%w: %s", ErrWrongPicture, d)
	}
	if r.auditErr != nil {
		return fmt.Errorf("%w: %w", ErrAudit, r.auditErr)
	}
	if r.clean {
		if d := diffs(r.rows, boardOf); d != "" {
			return fmt.Errorf("%w: %s", ErrWrongClean, d)
		}
		if c := r.cleanCounts; c.keys != r.applied || c.unkeyed > 0 || c.invalid > 0 {
			return fmt.Errorf("%w: %d distinct keys for %d reports applied (%d copies without a key, %d not a report)",
				ErrWrongClean, c.keys, r.applied, c.unkeyed, c.invalid)
		}
	}
	if r.paths {
		if err := r.bothPaths(); err != nil {
			return err
		}
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
