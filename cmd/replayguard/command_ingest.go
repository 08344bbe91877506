package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/term"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/app"
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
	drain, err := time.ParseDuration(e.flagString("drain-timeout"))
	if err != nil || drain <= 0 {
		return fmt.Errorf("%w: --drain-timeout %q is not a positive duration", errUsage, e.flagString("drain-timeout"))
	}
	opts := app.IngestOptions{DrainTimeout: drain}
	fmt.Sscan(e.flagString("batch"), &opts.BatchSize)
	if opts.BatchSize < 1 || opts.BatchSize > config.MaxBatch { // below 1 ingest would take 1000 instead without a word
		return fmt.Errorf("%w: --batch %d is not from 1 to %d", errUsage, opts.BatchSize, config.MaxBatch)
	}
	in, size, name, err := openInput(e, e.args[0]) // once the flags are known good
	if err != nil {
		return err
	}
	defer in.Close()
	opts.Input, opts.Name = in, name
	if isTerminal(e.stderr) || e.flagBool("progress") {
		opts.Progress = progressBar(e.stderr, size)
	}
	return e.tool().Ingest(e.ctx, opts)
}

// openInput opens arg, a capture file or "-" for stdin, with its size (0
// for stdin) and the name its records give as their broker: the file's
// absolute, cleaned path, so that one file ingested as feed.jsonl and as
// /data/./feed.jsonl reads as one broker in the report, never a change. A
// directory is refused.
func openInput(e *env, arg string) (io.ReadCloser, int64, string, error) {
	if arg == "-" {
		return io.NopCloser(e.stdin), 0, "stdin", nil
	}
	name, err := filepath.Abs(arg)
	if err != nil {
		return nil, 0, "", fmt.Errorf("ingest %s: %w", arg, err)
	}
	f, err := os.Open(arg)
	if err != nil {
		return nil, 0, "", err
	}
	st, err := f.Stat()
	if err == nil && st.IsDir() { // refused before the store is opened, or created
		err = fmt.Errorf("ingest %s: is a directory, not a capture file: give a JSON Lines file, or - for stdin", arg)
	}
	if err != nil {
		f.Close()
		return nil, 0, "", err
	}
	return f, st.Size(), name, nil
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
			fmt.Fprintf(w, "\ringest: %s, %.0f msg/s", counted(lines, "message", "messages"), rate)
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
		fmt.Fprintf(w, "\ringest: [%s] %3.0f%%  %s, %.0f msg/s", bar, frac*100, counted(lines, "message", "messages"), rate)
	}
}
