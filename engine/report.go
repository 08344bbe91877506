package engine

import (
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
	Online        bool                 `json:"online"`
	BdSeq         int64                `json:"bdseq"`          // the current session's, unwrapped
	LastBirth     time.Time            `json:"last_birth"`     // when the current birth was applied
	BirthPosition uint64               `json:"birth_position"` // its audit record
	Devices       []SparkplugDevReport `json:"devices,omitempty"`
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
	r := &SparkplugReport{Online: st.Online, BdSeq: st.BdSeq, LastBirth: b.Time, BirthPosition: b.Position}
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
	for _, s := range states {
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
