package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/source/file"
)

func ingestFlags(fs *flag.FlagSet) {
	fs.Int("batch", 1000, "messages per commit")
	fs.Bool("progress", false, "show progress even when stderr is not a terminal")
	fs.Duration("drain-timeout", defaultDrainTimeout, "with forward effects: how long to wait for the downstream at the end, and for room in a full outbox")
}

// defaultDrainTimeout bounds how long ingest waits for the forward
// effects' downstream.
const defaultDrainTimeout = 30 * time.Second

func cmdIngest(e *env) error {
	if len(e.args) != 1 {
		return fmt.Errorf("%w: ingest takes one FILE or -", errUsage)
	}
	in, size, name, err := openInput(e, e.args[0])
	if err != nil {
		return err
	}
	defer in.Close()
	drain, err := time.ParseDuration(e.flagString("drain-timeout"))
	if err != nil || drain <= 0 {
		return fmt.Errorf("%w: --drain-timeout %q is not a positive duration", errUsage, e.flagString("drain-timeout"))
	}
	a, err := app.Open(e.ctx, e.cfg, app.Options{Logger: e.log, Member: app.MemberFor("ingest"), Sinks: true,
		AdmitWait: drain, OutputClientID: app.MemberFor("ingest") + "-out"})
	if err != nil {
		return err
	}
	defer a.Close()
	stopForward := runForward(e, a)
	defer stopForward()
	if m := a.Engine.Member(); m != "" {
		fmt.Fprintf(e.stderr, "ingest: writing the audit chain of member %s on the %s store\n", m, e.cfg.Store.Kind)
	}
	var batch int
	fmt.Sscan(e.flagString("batch"), &batch)
	opts := file.Options{Name: name, BatchSize: batch}
	if isTerminal(e.stderr) || e.flagBool("progress") {
		opts.Progress = progressBar(e.stderr, size)
	}
	sum, err := file.Ingest(e.ctx, a.Engine, in, opts)
	if opts.Progress != nil {
		fmt.Fprintln(e.stderr)
	}
	if err != nil {
		stopForward()
		reportForward(e, a, 0)
		return fmt.Errorf("after %d messages: %w", sum.Lines, err)
	}
	fmt.Fprintln(e.stdout, sum.String())
	flushForward(e, a, drain)
	stopForward()
	flushSinks(e, a)
	return applyRetention(e, a)
}

// sinkFlushTimeout bounds how long ingest waits for the audit sinks at its
// end; what they did not take waits behind their cursors.
const sinkFlushTimeout = 10 * time.Second

// flushSinks delivers what the audit sinks take within sinkFlushTimeout.
// A sink that is down is not an error: its cursor keeps the rest for the
// next run or ingest.
func flushSinks(e *env, a *app.App) {
	if err := a.FlushSinks(e.ctx, sinkFlushTimeout); err != nil {
		fmt.Fprintf(e.stderr, "audit sinks: %v; the rest is delivered from the cursor by the next run or ingest\n", err)
	}
}

// runForward starts delivering the forward effects' outbox while ingest
// decides, and returns the function that stops it and waits.
func runForward(e *env, a *app.App) (stop func()) {
	if a.Forward == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.RunForward(ctx)
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// flushForward waits up to timeout for the downstream to take what ingest
// forwarded, then says what it delivered and what is left.
func flushForward(e *env, a *app.App, timeout time.Duration) {
	if a.Forward == nil {
		return
	}
	pending, _ := a.FlushForward(e.ctx, timeout)
	reportForward(e, a, pending)
}

// reportForward says on stderr what the drainer delivered and held, and
// how many entries wait in the outbox for a run.
func reportForward(e *env, a *app.App, pending int) {
	if a.Forward == nil {
		return
	}
	st := a.Forward.Status()
	var delivered, held uint64
	for _, o := range st.Outputs {
		delivered, held = delivered+o.Delivered, held+o.Held
	}
	if pending == 0 {
		pending = st.Depth
	}
	fmt.Fprintf(e.stderr, "forward: %d entries delivered downstream", delivered)
	if held > 0 {
		fmt.Fprintf(e.stderr, ", %d refused and held for an operator (audit outcome forward_held)", held)
	}
	if pending > 0 {
		fmt.Fprintf(e.stderr, "; %d still pending in the outbox for `replayguard run` to deliver", pending)
		f := st.Warning()
		if f == "" {
			f = st.Blocked()
		}
		if f != "" {
			fmt.Fprintf(e.stderr, " (%s)", f)
		}
	}
	fmt.Fprintln(e.stderr)
}

// applyRetention runs audit retention once, when it is configured.
func applyRetention(e *env, a *app.App) error {
	r, err := a.Retention()
	if err != nil || r == nil {
		return err
	}
	res, err := r.Once(e.ctx)
	if err != nil {
		return fmt.Errorf("audit retention: %w", err)
	}
	if res.Records > 0 {
		fmt.Fprintf(e.stderr, "audit retention: %d records archived in %d segments to %s; the store keeps positions from %d\n",
			res.Records, res.Segments, e.cfg.Audit.Archive, res.Base.Position+1)
	}
	return nil
}

func openInput(e *env, arg string) (io.ReadCloser, int64, string, error) {
	if arg == "-" {
		return io.NopCloser(e.stdin), 0, "stdin", nil
	}
	f, err := os.Open(arg)
	if err != nil {
		return nil, 0, "", err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, "", err
	}
	return f, st.Size(), arg, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressBar draws one line on w, redrawn after each batch.
func progressBar(w io.Writer, total int64) func(lines, bytes int64) {
	start := time.Now()
	return func(lines, bytes int64) {
		rate := float64(lines) / max(time.Since(start).Seconds(), 1e-9)
		if total <= 0 {
			fmt.Fprintf(w, "\ringest: %d messages, %.0f msg/s", lines, rate)
			return
		}
		frac := min(float64(bytes)/float64(total), 1)
		const width = 30
		done := int(frac * width)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = '.'
			if i < done {
				bar[i] = '#'
			}
		}
		fmt.Fprintf(w, "\ringest: [%s] %3.0f%%  %d messages, %.0f msg/s", bar, frac*100, lines, rate)
	}
}
