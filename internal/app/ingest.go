package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/source/file"
)

// IngestOptions say what Ingest decides and how.
type IngestOptions struct {
	Input io.Reader // a captured feed, JSON Lines
	Name  string    // recorded as the messages' broker (the file, or "stdin")
	// BatchSize is the messages per commit; default 1000.
	BatchSize int
	// Progress, when set, is called after each batch; Ingest ends its line
	// on Tool.Err.
	Progress func(lines, bytes int64)
	// DrainTimeout bounds how long Ingest waits for room in a full outbox
	// and, at the end, for the forward effects' downstream. Must be
	// positive.
	DrainTimeout time.Duration
}

// SinkFlushTimeout bounds how long run waits for the audit sinks at its
// stop, and how long Ingest waits at its end for sinks that deliver
// nothing (a sink that keeps delivering is waited for to the end); what
// they did not take waits behind their cursors.
const SinkFlushTimeout = 10 * time.Second

// sinkFlushIdle is SinkFlushTimeout, for Ingest; tests shorten it.
var sinkFlushIdle = SinkFlushTimeout

// Ingest is `replayguard ingest`: it decides a captured feed on the
// store, as the member MemberFor("ingest") on a shared one, prints the
// summary to Out, then on Err what the forward effects' downstream and the
// audit sinks took and what audit retention archived (on a shared store:
// of each chain it claims, see finishChains).
func (t *Tool) Ingest(ctx context.Context, opts IngestOptions) error {
	// A bound one batch passes is passed by every batch: the gate would
	// turn full and back at each, so it is refused, as run refuses it.
	if why := t.Config.OutboxBoundProblem(cmp.Or(opts.BatchSize, file.DefaultBatchSize), "--batch"); why != "" {
		return fmt.Errorf("%w: outbox.max_entries: %s", ErrUsage, why)
	}
	a, err := Open(ctx, t.Config, Options{Logger: t.Log, Member: MemberFor("ingest"), Sinks: true,
		AdmitWait: opts.DrainTimeout, OutputClientID: MemberFor("ingest") + "-out"})
	if err != nil {
		return err
	}
	defer func() {
		if err := a.Close(); err != nil {
			t.Log.Warn("closing the store", "err", err)
		}
	}()
	stopForward := a.startForward(ctx)
	defer stopForward()
	finishSinks := t.streamSinks(ctx, a)
	defer finishSinks()
	if m := a.Engine.Member(); m != "" {
		fmt.Fprintf(t.errOut(), "ingest: writing the audit chain of member %s on the %s store\n", m, t.Config.Store.Kind)
	}
	sum, err := file.Ingest(ctx, a.Engine, opts.Input, file.Options{Name: opts.Name, BatchSize: opts.BatchSize, Progress: opts.Progress})
	if opts.Progress != nil {
		fmt.Fprintln(t.errOut())
	}
	if err != nil {
		stopForward()
		t.reportForward(a, 0)
		return fmt.Errorf("after %s: %w", counted(sum.Lines, "message", "messages"), err)
	}
	fmt.Fprintln(t.Out, sum.String())
	left := t.flushForward(ctx, a, opts.DrainTimeout)
	stopForward()
	if left > 0 && t.Config.Store.Kind == config.StoreMemory {
		return fmt.Errorf("forward: %s not delivered within --drain-timeout %s are lost: the memory store keeps no outbox after ingest",
			counted(left, "entry", "entries"), opts.DrainTimeout)
	}
	c, err := a.chainWork()
	if err != nil {
		return err
	}
	if c != nil {
		return t.finishChains(ctx, c)
	}
	t.sayUndelivered(finishSinks())
	return t.applyRetention(ctx, a)
}

// finishChains is the end of an ingest on a shared store with audit sinks
// or retention: it claims the members' chains it may stream and trim (its
// own, and those of members that are gone), delivers them to the sinks,
// applies retention to each, and releases them. The claims are renewed
// meanwhile: a flush and the passes may outlast them.
func (t *Tool) finishChains(ctx context.Context, c *chains) error {
	defer c.releaseAll(ctx)
	if err := c.claim(ctx); err != nil {
		return fmt.Errorf("audit: claim the members' chains: %w", err)
	}
	stop := c.keepClaimed(ctx)
	defer stop()
	t.flushSinks(ctx, c.a)
	res, err := c.trim(ctx)
	for _, r := range res {
		if r.Records > 0 {
			fmt.Fprintf(t.errOut(), "audit retention: %s of member %s's chain archived in %s to %s; the store keeps its positions from %d\n",
				counted(r.Records, "record", "records"), r.Member, counted(r.Segments, "segment", "segments"), audit.ChainDir(t.Config.Audit.Archive, r.Member), r.Base.Position+1)
		}
		t.sayHeld(r.Member, r.Held)
	}
	if err != nil {
		return fmt.Errorf("audit retention: %w", err)
	}
	return nil
}

// streamSinks delivers to the audit sinks while ingest decides, on a
// single-owner store (a shared one's chains are claimed, and streamed, at
// the end: finishChains), so that a long ingest's records reach them as
// they commit. The function it returns ends the stream as flushSinks
// ends a flush; without sinks, or on a shared store, it does nothing.
func (t *Tool) streamSinks(ctx context.Context, a *App) (finish func() error) {
	if a.Sinks == nil || t.Config.Store.Shared() {
		return func() error { return nil }
	}
	return a.Sinks.Stream(ctx, sinkFlushIdle)
}

// flushSinks delivers what the audit sinks take for as long as they make
// progress: the sink's records are all there once ingest exits, however
// long a slow sink takes. One that delivers nothing for SinkFlushTimeout
// (down) is not an error: its cursor keeps the rest for the next run or
// ingest.
func (t *Tool) flushSinks(ctx context.Context, a *App) {
	t.sayUndelivered(a.FlushSinksUntilIdle(ctx, sinkFlushIdle))
}

// sayUndelivered says what a flush of the audit sinks left behind them.
func (t *Tool) sayUndelivered(err error) {
	if err != nil {
		// err says "audit sink" and names each sink (sink.ErrUndelivered).
		fmt.Fprintf(t.errOut(), "%v; the rest is delivered from the cursor by the next run or ingest\n", err)
	}
}

// flushForward waits up to timeout for the downstream to take what ingest
// forwarded, then says what it delivered and what is left, and returns
// how many entries are left.
func (t *Tool) flushForward(ctx context.Context, a *App, timeout time.Duration) int {
	if a.Forward == nil {
		return 0
	}
	pending, _ := a.FlushForward(ctx, timeout)
	return t.reportForward(a, pending)
}

// reportForward says on Err what the drainer delivered and held, and how
// many entries wait in the outbox for a run (on the memory store, which
// ends with the process, they are lost instead), and returns that number.
func (t *Tool) reportForward(a *App, pending int) int {
	if a.Forward == nil {
		return 0
	}
	w := t.errOut()
	st := a.Forward.Status()
	var delivered, held uint64
	for _, o := range st.Outputs {
		delivered, held = delivered+o.Delivered, held+o.Held
	}
	if pending == 0 {
		pending = st.Depth
	}
	fmt.Fprintf(w, "forward: %s delivered downstream", counted(delivered, "entry", "entries"))
	if held > 0 {
		fmt.Fprintf(w, ", %d refused and held for an operator (audit outcome forward_held)", held)
	}
	switch {
	case pending > 0 && t.Config.Store.Kind == config.StoreMemory:
		fmt.Fprintf(w, "; %d not delivered, lost with the memory store", pending)
	case pending > 0:
		fmt.Fprintf(w, "; %d still pending in the outbox for `replayguard run` to deliver", pending)
	}
	if pending > 0 {
		f := st.Warning()
		if f == "" {
			f = st.Blocked()
		}
		if f != "" {
			fmt.Fprintf(w, " (%s)", f)
		}
	}
	fmt.Fprintln(w)
	return pending
}

// applyRetention runs audit retention once, when it is configured.
func (t *Tool) applyRetention(ctx context.Context, a *App) error {
	r, err := a.Retention()
	if err != nil || r == nil {
		return err
	}
	res, err := r.Once(ctx)
	if err != nil {
		return fmt.Errorf("audit retention: %w", err)
	}
	if res.Records > 0 {
		fmt.Fprintf(t.errOut(), "audit retention: %s archived in %s to %s; the store keeps positions from %d\n",
			counted(res.Records, "record", "records"), counted(res.Segments, "segment", "segments"), t.Config.Audit.Archive, res.Base.Position+1)
	}
	t.sayHeld("", res.Held)
	return nil
}

// sayHeld says on Err which audit sinks keep records of chain ("" a
// single-owner store's log) beyond audit.retention.max_records, not yet
// delivered: the store keeps them until the sink does.
func (t *Tool) sayHeld(chain string, held []audit.SinkHeld) {
	of := ""
	if chain != "" {
		of = fmt.Sprintf(" of member %s's chain", chain)
	}
	for _, s := range held {
		fmt.Fprintf(t.errOut(), "audit retention: audit sink %s has yet to deliver %s%s beyond audit.retention.max_records (%d), from its cursor at %d: the store keeps them until it does\n",
			s.Sink, counted(s.Records, "record", "records"), of, t.Config.Audit.Retention.MaxRecords, s.Cursor)
	}
}
