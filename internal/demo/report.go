package demo

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/replayguard/replayguard/forward"
)

// narrator prints the timeline: each line stamped with the time since the
// demo began.
type narrator struct {
	w     io.Writer
	start time.Time
}

func (n *narrator) say(format string, args ...any) {
	fmt.Fprintf(n.w, "%6.1fs  %s\n", time.Since(n.start).Seconds(), fmt.Sprintf(format, args...))
}

// more continues the previous line of the timeline.
func (n *narrator) more(format string, args ...any) {
	fmt.Fprintf(n.w, "         %s\n", fmt.Sprintf(format, args...))
}

func (n *narrator) plain(format string, args ...any) {
	fmt.Fprintf(n.w, format+"\n", args...)
}

// row is one entity field in the four pictures.
type row struct {
	entity, field              string
	naive, guard, board, truth string
}

// rows lines the pictures up, by entity and field.
func rows(naive, guard, board, truth picture) []row {
	type key struct{ e, f string }
	keys := map[key]bool{}
	for _, p := range []picture{naive, guard, board, truth} {
		for e, fs := range p {
			for f := range fs {
				keys[key{e, f}] = true
			}
		}
	}
	out := make([]row, 0, len(keys))
	for k := range keys {
		out = append(out, row{entity: k.e, field: k.f, naive: naive[k.e][k.f], guard: guard[k.e][k.f],
			board: board[k.e][k.f], truth: truth[k.e][k.f]})
	}
	slices.SortFunc(out, func(a, b row) int {
		if c := strings.Compare(a.entity, b.entity); c != 0 {
			return c
		}
		return strings.Compare(a.field, b.field)
	})
	return out
}

// wrongRows counts the rows where pick differs from the truth.
func wrongRows(rs []row, pick func(row) string) int {
	n := 0
	for _, r := range rs {
		if pick(r) != r.truth {
			n++
		}
	}
	return n
}

// printTable writes the side-by-side pictures, marking every wrong value;
// the dispatch board's column only with a clean stream.
func printTable(w io.Writer, rs []row, board bool, truth string) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	head := []string{"entity", "field", "naive consumer", "replayguard"}
	if board {
		head = append(head, "dispatch board (keyed)")
	}
	fmt.Fprintf(tw, "  %s\t%s\n", strings.Join(head, "\t"), truth)
	for _, r := range rs {
		cells := []string{r.entity, r.field, mark(r.naive, r.truth), mark(r.guard, r.truth)}
		if board {
			cells = append(cells, mark(r.board, r.truth))
		}
		fmt.Fprintf(tw, "  %s\t%s\n", strings.Join(cells, "\t"), show(r.truth))
	}
	tw.Flush()
}

func mark(v, truth string) string {
	if v != truth {
		return show(v) + "  ✗ wrong"
	}
	return show(v)
}

func show(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

// plural is "1 report", "2 reports".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// copies is "1 copy", "2 copies".
func copies(n int) string {
	if n == 1 {
		return "1 copy"
	}
	return fmt.Sprintf("%d copies", n)
}

// describeProperties writes a forwarded copy's user properties on one
// line, the key shortened.
func describeProperties(user paho.UserProperties) string {
	parts := make([]string, 0, len(user))
	for _, p := range user {
		v := p.Value
		if p.Key == forward.HeaderKey && len(v) > 12 {
			v = v[:12] + "…"
		}
		parts = append(parts, p.Key+"="+v)
	}
	return strings.Join(parts, "  ")
}
