package report

import "time"

// shortSpan is the longest period, in seconds, drawn in bars shorter than
// a minute: a feed of a minute or two (a drill, the demo) in one bar would
// hide its replay burst.
const shortSpan = 120

// bucketSeconds are the sub-minute bar widths, for a short period.
var bucketSeconds = []int64{1, 2, 5, 10, 15, 30}

// bucketMinutes are the bar widths the timeline may use, narrowest first.
var bucketMinutes = []int64{1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440}

// timeline lays the per-minute counts out over the period: from the
// period's start (or the first decision) to its end (or the last
// decision), in the narrowest bars that keep within MaxBars; a period
// under shortSpan seconds in bars of seconds.
func (b *builder) timeline() Timeline {
	tl := Timeline{BucketSeconds: 60, Buckets: []Bucket{}}
	start, end := b.first, b.last
	if !b.opts.From.IsZero() {
		start = b.opts.From
	}
	if !b.opts.To.IsZero() {
		end = b.opts.To.Add(-time.Nanosecond)
	}
	if start.IsZero() || end.IsZero() || end.Before(start) {
		return tl
	}
	if b.seconds != nil && end.Unix()-start.Unix() < shortSpan {
		return b.shortTimeline(start.Unix(), end.Unix())
	}
	first, last := floorDiv(start.Unix(), 60), floorDiv(end.Unix(), 60)
	width := bucketMinutes[len(bucketMinutes)-1]
	for _, w := range bucketMinutes {
		if (last-first)/w+1 <= int64(b.opts.MaxBars) {
			width = w
			break
		}
	}
	for (last-first)/width+1 > int64(b.opts.MaxBars) { // beyond a day per bar
		width *= 2
	}
	tl.BucketSeconds = width * 60
	first = floorDiv(first, width) * width
	for m := first; m <= last; m += width {
		bk := Bucket{Start: time.Unix(m*60, 0).UTC()}
		for i := m; i < m+width; i++ {
			if o := b.minutes[i]; o != nil {
				add(&bk.Outcomes, o)
			}
		}
		tl.Buckets = append(tl.Buckets, bk)
	}
	return tl
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// shortTimeline lays out a period shorter than shortSpan seconds in the
// narrowest sub-minute bars that keep within 60 bars and MaxBars.
func (b *builder) shortTimeline(first, last int64) Timeline {
	width := int64(60)
	for _, w := range bucketSeconds {
		if n := (last-first)/w + 1; n <= 60 && n <= int64(b.opts.MaxBars) {
			width = w
			break
		}
	}
	tl := Timeline{BucketSeconds: width, Buckets: []Bucket{}}
	first = floorDiv(first, width) * width
	for s := first; s <= last; s += width {
		bk := Bucket{Start: time.Unix(s, 0).UTC()}
		for i := s; i < s+width; i++ {
			if o := b.seconds[i]; o != nil {
				add(&bk.Outcomes, o)
			}
		}
		tl.Buckets = append(tl.Buckets, bk)
	}
	return tl
}

func add(to, o *Outcomes) {
	to.Applied += o.Applied
	to.AppliedLate += o.AppliedLate
	to.Duplicate += o.Duplicate
	to.Conflict += o.Conflict
	to.Quarantined += o.Quarantined
	to.Malformed += o.Malformed
}
