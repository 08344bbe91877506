package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// progress draws a bar on a terminal, or prints a line per measurement
// elsewhere.
type progress struct {
	w        io.Writer
	tty      bool
	n, total int
	label    string
}

func newProgress(w *os.File, total int) *progress {
	st, err := w.Stat()
	return &progress{w: w, tty: err == nil && st.Mode()&os.ModeCharDevice != 0, total: total}
}

func (p *progress) step(what, side string, round, rounds int) {
	p.n++
	p.label = fmt.Sprintf("%s · %s · round %d/%d", what, side, round, rounds)
	if p.tty {
		const width = 30
		done := width * (p.n - 1) / p.total
		fmt.Fprintf(p.w, "\r\x1b[K[%s%s] %d/%d %s", strings.Repeat("=", done), strings.Repeat(" ", width-done), p.n, p.total, p.label)
	}
}

func (p *progress) result(r result) {
	if p.tty {
		if r.err != "" {
			fmt.Fprintf(p.w, "\r\x1b[K%s: FAILED: %s\n", p.label, r.err)
		}
		return
	}
	if r.err != "" {
		fmt.Fprintf(p.w, "[%d/%d] %s: FAILED: %s\n", p.n, p.total, p.label, r.err)
		return
	}
	what := r.check.String()
	if r.check.messages == 0 {
		what = "no check (a benchmark on its own messages)"
	}
	fmt.Fprintf(p.w, "[%d/%d] %s: %s msg/s, %s\n", p.n, p.total, p.label, rate(r.rate), strings.ReplaceAll(what, "**", ""))
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K[%s] %d/%d done\n", strings.Repeat("=", 30), p.total, p.total)
	}
}

// rate renders messages per second in thousands.
func rate(r float64) string { return fmt.Sprintf("%.1f k", r/1000) }
