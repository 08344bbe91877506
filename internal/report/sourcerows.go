package report

import (
	"cmp"
	"slices"
)

// MaxSourceRows bounds the rows of the HTML page's per-source table. A
// fleet of meters is a source a meter: a row each would make a page of
// tens of megabytes that no browser shows and no printer prints. Past it,
// the page shows the sources with the most to review and one row summing
// the others; the JSON report lists every source.
const MaxSourceRows = 1000

// sourceRows is the per-source table as the HTML page shows it.
type sourceRows struct {
	Shown []SourceFigures
	// Left is how many sources the table leaves out, Rest their figures
	// summed (nil when it leaves out none).
	Left int
	Rest *SourceFigures
}

// sourceTable keeps every source, in the report's order, when they fit in
// limit rows; else the limit sources with the most to review, most first (held
// messages, then missing sequences, then duplicates, then late fills; the
// report's order between equals), and the sum of the rest.
func sourceTable(all []SourceFigures, limit int) sourceRows {
	if len(all) <= limit {
		return sourceRows{Shown: all}
	}
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		a, b := &all[x], &all[y]
		return cmp.Or(cmp.Compare(b.held(), a.held()), cmp.Compare(b.MissingSequences, a.MissingSequences),
			cmp.Compare(b.Duplicate, a.Duplicate), cmp.Compare(b.AppliedLate, a.AppliedLate))
	})
	rows := sourceRows{Left: len(all) - limit, Rest: &SourceFigures{}}
	for _, i := range order[:limit] {
		rows.Shown = append(rows.Shown, all[i])
	}
	for _, i := range order[limit:] {
		rows.Rest.add(&all[i])
	}
	return rows
}

// held is how many of the source's deliveries were held for an operator.
func (s *SourceFigures) held() uint64 {
	return s.Conflict + s.Quarantined + s.Malformed + s.HeldAgain
}

// add sums o's figures into s.
func (s *SourceFigures) add(o *SourceFigures) {
	add(&s.Outcomes, &o.Outcomes)
	s.Released += o.Released
	s.HeldAgain += o.HeldAgain
	s.Discarded += o.Discarded
	s.Forwards.Held += o.Forwards.Held
	s.Forwards.Retried += o.Forwards.Retried
	s.Forwards.Dropped += o.Forwards.Dropped
	s.GapsOpened += o.GapsOpened
	s.MissingSequences += o.MissingSequences
	s.GapsClosed += o.GapsClosed
}
