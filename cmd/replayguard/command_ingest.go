package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/replayguard/replayguard/internal/app"
	"github.com/replayguard/replayguard/source/file"
)

func ingestFlags(fs *flag.FlagSet) {
	fs.Int("batch", 1000, "messages per commit")
	fs.Bool("progress", false, "show progress even when stderr is not a terminal")
}

func cmdIngest(e *env) error {
	if len(e.args) != 1 {
		return fmt.Errorf("%w: ingest takes one FILE or -", errUsage)
	}
	in, size, name, err := openInput(e, e.args[0])
	if err != nil {
		return err
	}
	defer in.Close()
	a, err := app.Open(e.ctx, e.cfg, app.Options{Logger: e.log, Member: app.MemberFor("ingest"), Sinks: true})
	if err != nil {
		return err
	}
	defer a.Close()
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
		return fmt.Errorf("after %d messages: %w", sum.Lines, err)
	}
	fmt.Fprintln(e.stdout, sum.String())
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
