package report

import (
	"fmt"
	"html"
	"html/template"
	"slices"
	"strconv"
	"strings"
	"time"
)

// outcomeOrder stacks the bars bottom up, the order DESIGN.md lists them.
var outcomeOrder = []string{"applied", "applied_late", "duplicate", "conflict", "quarantined", "malformed"}

func field(o *Outcomes, i int) uint64 {
	return [...]uint64{o.Applied, o.AppliedLate, o.Duplicate, o.Conflict, o.Quarantined, o.Malformed}[i]
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// The timeline's geometry, in SVG user units.
const (
	svgW, svgH             = 1000.0, 300.0
	padL, padR, padT, padB = 56.0, 16.0, 34.0, 40.0
)

// timelineSVG draws the timeline as stacked bars, one per bucket, with the
// broker changes as dashed lines. Every text in it is escaped here: it is
// inserted into the page as it is.
func timelineSVG(r *Report) template.HTML {
	tl := r.Timeline
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="timeline" viewBox="0 0 %g %g" role="img" aria-label="decisions per %s by outcome">`,
		svgW, svgH, html.EscapeString(bucketText(tl.BucketSeconds)))
	if len(tl.Buckets) == 0 {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" class="empty">no decisions in the period</text></svg>`, svgW/2, svgH/2)
		return template.HTML(b.String())
	}
	peak := uint64(0)
	for _, bk := range tl.Buckets {
		peak = max(peak, bk.Total())
	}
	top := niceCeil(peak)
	plotW, plotH := svgW-padL-padR, svgH-padT-padB
	y := func(v uint64) float64 { return padT + plotH - plotH*float64(v)/float64(top) }
	for _, v := range []uint64{0, top / 2, top} {
		fmt.Fprintf(&b, `<line class="grid" x1="%g" x2="%g" y1="%.1f" y2="%.1f"/><text class="axis" x="%g" y="%.1f" text-anchor="end">%d</text>`,
			padL, svgW-padR, y(v), y(v), padL-6, y(v)+4, v)
	}
	bw := plotW / float64(len(tl.Buckets))
	gap := min(bw*0.15, 2)
	layout := timeLayout(tl)
	for i, bk := range tl.Buckets {
		x := padL + float64(i)*bw
		base := uint64(0)
		for j, name := range outcomeOrder {
			n := field(&bk.Outcomes, j)
			if n == 0 {
				continue
			}
			fmt.Fprintf(&b, `<rect class="bar o-%s" data-outcome="%s" data-start="%s" data-count="%d" x="%.2f" y="%.2f" width="%.2f" height="%.2f"><title>%s %s: %d</title></rect>`,
				name, name, bk.Start.Format(time.RFC3339), n, x+gap/2, y(base+n), bw-gap, y(base)-y(base+n),
				html.EscapeString(bk.Start.Format(layout)), name, n)
			base += n
		}
	}
	ticks(&b, tl, bw)
	start, span := tl.Buckets[0].Start, time.Duration(len(tl.Buckets))*time.Duration(tl.BucketSeconds)*time.Second
	for _, c := range slices.Concat(r.BrokerChanges, r.Reconnects) {
		if c.From == "" {
			continue
		}
		x := padL + plotW*float64(c.Time.Sub(start))/float64(span)
		label := "→ " + c.To
		if c.Reconnect {
			label = "↻ " + c.To
		}
		fmt.Fprintf(&b, `<line class="failover" x1="%.2f" x2="%.2f" y1="%g" y2="%g"/><text class="failover-label" x="%.2f" y="%g">%s</text>`,
			x, x, padT-4, padT+plotH, x+3, padT-8, html.EscapeString(label))
	}
	fmt.Fprintf(&b, `<line class="axis-line" x1="%g" x2="%g" y1="%g" y2="%g"/></svg>`, padL, svgW-padR, padT+plotH, padT+plotH)
	return template.HTML(b.String())
}

// timeLayout is how a bucket's start is written: with seconds for bars
// shorter than a minute, with the day for a period longer than one.
func timeLayout(tl Timeline) string {
	if tl.BucketSeconds < 60 {
		return "15:04:05"
	}
	if time.Duration(len(tl.Buckets))*time.Duration(tl.BucketSeconds)*time.Second > 24*time.Hour {
		return "01-02 15:04"
	}
	return "15:04"
}

// ticks labels about eight buckets along the time axis.
func ticks(b *strings.Builder, tl Timeline, bw float64) {
	n := len(tl.Buckets)
	every := max(1, (n+7)/8)
	layout := timeLayout(tl)
	for i := 0; i < n; i += every {
		x := padL + float64(i)*bw + bw/2
		fmt.Fprintf(b, `<text class="axis" x="%.2f" y="%g" text-anchor="middle">%s</text>`,
			x, svgH-padB+16, html.EscapeString(tl.Buckets[i].Start.Format(layout)))
	}
	fmt.Fprintf(b, `<text class="axis" x="%g" y="%g" text-anchor="end">UTC, one bar per %s</text>`, svgW-padR, svgH-6, html.EscapeString(bucketText(tl.BucketSeconds)))
}

// niceCeil is the least of 2, 4 and 10 times a power of ten at or above v:
// the axis' top, whose half is whole.
func niceCeil(v uint64) uint64 {
	if v <= 2 {
		return 2
	}
	for p := uint64(1); ; p *= 10 {
		for _, m := range []uint64{2, 4, 10} {
			if m*p >= v {
				return m * p
			}
		}
	}
}

func bucketText(sec int64) string {
	d := time.Duration(sec) * time.Second
	switch {
	case d < time.Minute:
		if d == time.Second {
			return "second"
		}
		return fmt.Sprintf("%d seconds", int64(d/time.Second))
	case d == time.Minute:
		return "minute"
	case d == time.Hour:
		return "hour"
	case d%time.Hour == 0:
		return fmt.Sprintf("%d hours", int64(d/time.Hour))
	default:
		return fmt.Sprintf("%d minutes", int64(d/time.Minute))
	}
}
