package engine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"
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
	// Sparkplug is the edge node's session, for a sparkplug route's source.
	Sparkplug *SparkplugReport `json:"sparkplug,omitempty"`
	// Feed is the redundant broker path that delivered the source's last
	// message applied (mqtt.feeds); empty with one path.
	Feed string `json:"feed,omitempty"`
}

// SparkplugReport is an edge node's Sparkplug session as `sources` shows it.
type SparkplugReport struct {
	Online bool `json:"online"`
	// BdSeq is the current session's bdSeq as the edge sends it in its
	// NBIRTH and NDEATH: 0 to 255.
	BdSeq int64 `json:"bdseq"`
	// BdSeqUnwrapped is the same bdSeq counted on past 255 (256 is the
	// session after 255), which tells the sessions of different wraps
	// apart: the number the source's epochs and audit records carry.
	BdSeqUnwrapped int64                `json:"bdseq_unwrapped"`
	LastBirth      time.Time            `json:"last_birth"`     // when the current birth was applied
	BirthPosition  uint64               `json:"birth_position"` // its audit record
	Devices        []SparkplugDevReport `json:"devices,omitempty"`
}

// SparkplugDevReport is one device of an edge's current birth.
type SparkplugDevReport struct {
	Device string `json:"device"`
	Online bool   `json:"online"`
}

func sparkplugReport(st *SparkplugState) *SparkplugReport {
	if st == nil || len(st.Births) == 0 {
		return nil
	}
	b := st.Births[0]
	r := &SparkplugReport{Online: st.Online, BdSeq: st.BdSeq % 256, BdSeqUnwrapped: st.BdSeq, LastBirth: b.Time, BirthPosition: b.Position}
	for _, name := range slices.Sorted(maps.Keys(b.Devices)) {
		r.Devices = append(r.Devices, SparkplugDevReport{Device: name, Online: b.Devices[name].Online})
	}
	return r
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

// openGaps is the OpenGaps of s's report: the sequences missing in its
// kept epochs.
func (s *SourceState) openGaps() int64 {
	n := int64(0)
	for i := range s.Epochs {
		for _, g := range s.Epochs[i].OpenGaps() {
			n += g.To - g.From + 1
		}
	}
	return n
}

// SourceReports turns source windows into reports, sorted by route and source.
func SourceReports(states []SourceState) []SourceReport {
	out := make([]SourceReport, 0, len(states))
	for i := range states {
		out = append(out, sourceReport(&states[i]))
	}
	sortReports(out)
	return out
}

// StoredSources reports every source window store holds, sorted as
// SourceReports sorts them: what `sources` prints of a store no engine
// holds. It reads the windows one at a time where the store can scan them
// (Capabilities.Scan or Rows), holding the reports only, else from one Load.
func StoredSources(ctx context.Context, store Store) ([]SourceReport, error) {
	sc := scannerOf(store)
	if sc == nil {
		snap, err := store.Load(ctx)
		if err != nil {
			return nil, err
		}
		return SourceReports(snap.Sources), nil
	}
	out := []SourceReport{}
	err := sc.ScanSources(ctx, func(s SourceState) error {
		out = append(out, sourceReport(&s))
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortReports(out)
	return out, nil
}

// ScanStoredEntities calls fn for each entity store holds, in name order,
// until fn returns an error (which it returns): what `state` prints of a
// store no engine holds. It reads them one at a time where the store can
// scan them (Capabilities.Scan or Rows), else from one Load.
func ScanStoredEntities(ctx context.Context, store Store, fn func(EntityState) error) error {
	if sc := scannerOf(store); sc != nil {
		return sc.ScanEntities(ctx, fn)
	}
	snap, err := store.Load(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(snap.Entities, func(a, b EntityState) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range snap.Entities {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// scannerOf is what reads store's rows one at a time; nil when only Load
// does.
func scannerOf(store Store) RowScanner {
	caps := store.Capabilities()
	switch {
	case caps.Scan != nil:
		return caps.Scan
	case caps.Rows != nil:
		return caps.Rows
	}
	return nil
}

// sourceReport is the report of one source window.
func sourceReport(s *SourceState) SourceReport {
	r := SourceReport{Route: s.Route, Source: s.Source, High: -1, Gaps: []Range{}, Sparkplug: sparkplugReport(s.Sparkplug), Feed: s.Feed}
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
	return r
}

// sortReports sorts reports by route and source.
func sortReports(rs []SourceReport) {
	slices.SortFunc(rs, func(a, b SourceReport) int {
		if c := strings.Compare(a.Route, b.Route); c != 0 {
			return c
		}
		return slices.Compare(a.Source, b.Source)
	})
}

// SourceSelection is a part of the source windows, chosen by
// Engine.ReadSourcesUpTo, and what all of them hold.
type SourceSelection struct {
	Reports  []SourceReport // the windows chosen, by route and source
	Total    int            // the windows read
	OpenGaps int64          // the sequences missing in their kept epochs
}

// sourcePick chooses up to n reports of the windows given one at a time:
// those with open gaps first, each kind first by route and source. It
// holds no more than 2n reports at once; n <= 0 keeps every one.
type sourcePick struct {
	n            int
	gappy, quiet []SourceReport
	sel          SourceSelection
}

func (p *sourcePick) add(s *SourceState) {
	r := sourceReport(s)
	gaps := r.OpenGaps()
	p.sel.Total++
	p.sel.OpenGaps += gaps
	if gaps > 0 {
		p.gappy = p.trim(append(p.gappy, r), false)
	} else {
		p.quiet = p.trim(append(p.quiet, r), false)
	}
}

// trim keeps the first n of rs, by route and source, once it holds 2n,
// or at once when final.
func (p *sourcePick) trim(rs []SourceReport, final bool) []SourceReport {
	if p.n <= 0 || len(rs) < 2*p.n && !final {
		return rs
	}
	sortReports(rs)
	if len(rs) > p.n {
		clear(rs[p.n:])
		rs = rs[:p.n]
	}
	return rs
}

// done returns the selection: with n > 0, the first n windows with open
// gaps and as many of the others as there is room for.
func (p *sourcePick) done() SourceSelection {
	gappy := p.trim(p.gappy, true)
	quiet := p.trim(p.quiet, true)
	if p.n > 0 {
		quiet = quiet[:min(len(quiet), p.n-len(gappy))]
	}
	p.sel.Reports = append(append(make([]SourceReport, 0, len(gappy)+len(quiet)), gappy...), quiet...) // [] with none, as before
	sortReports(p.sel.Reports)
	return p.sel
}
