package report

import "time"

// bucketMinutes are the bar widths the timeline may use, narrowest first.
var bucketMinutes = []int64{1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440}

// timeline lays the per-minute counts out over the period: from the
// period's start (or the first decision) to its end (or the last
// decision), in the narrowest bars that keep within MaxBars.
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
				bk.Applied += o.Applied
				bk.AppliedLate += o.AppliedLate
				bk.Duplicate += o.Duplicate
				bk.Conflict += o.Conflict
				bk.Quarantined += o.Quarantined
				bk.Malformed += o.Malformed
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
