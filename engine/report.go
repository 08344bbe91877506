package engine

import (
	"slices"
	"strings"
)

// SourceReport is one source's sequence health, as `replayguard sources`
// and /api/v1/sources show it.
type SourceReport struct {
	Route  string        `json:"route"`
	Source []string      `json:"source"`
	Epoch  string        `json:"epoch,omitempty"`
	High   int64         `json:"high"`
	Gaps   []Range       `json:"gaps"`
	Older  []EpochReport `json:"older_epochs,omitempty"`
}

// EpochReport is a kept older epoch of a source.
type EpochReport struct {
	Epoch string  `json:"epoch"`
	High  int64   `json:"high"`
	Gaps  []Range `json:"gaps"`
}

// OpenGaps counts the sequences missing in every kept epoch.
func (r SourceReport) OpenGaps() int64 {
	n := int64(0)
	for _, g := range r.Gaps {
		n += g.To - g.From + 1
	}
	for _, o := range r.Older {
		for _, g := range o.Gaps {
			n += g.To - g.From + 1
		}
	}
	return n
}

// SourceReports turns source windows into reports, sorted by route and source.
func SourceReports(states []SourceState) []SourceReport {
	out := make([]SourceReport, 0, len(states))
	for _, s := range states {
		r := SourceReport{Route: s.Route, Source: s.Source, High: -1, Gaps: []Range{}}
		for i, w := range s.Epochs {
			gaps := w.OpenGaps()
			if gaps == nil {
				gaps = []Range{}
			}
			if i == 0 {
				r.Epoch, r.High, r.Gaps = w.Epoch, w.High, gaps
				continue
			}
			r.Older = append(r.Older, EpochReport{Epoch: w.Epoch, High: w.High, Gaps: gaps})
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b SourceReport) int {
		if c := strings.Compare(a.Route, b.Route); c != 0 {
			return c
		}
		return slices.Compare(a.Source, b.Source)
	})
	return out
}
