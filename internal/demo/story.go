package demo

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// report is one incident update from a field device, as published.
type report struct {
	Agency         string `json:"agency"`
	SourceID       string `json:"source_id"`
	BootID         int64  `json:"boot_id"`
	Sequence       int64  `json:"sequence"`
	IncidentID     int64  `json:"incident_id"`
	IncidentStatus string `json:"incident_status,omitempty"`
	CasualtyDelta  int64  `json:"casualty_delta,omitempty"`
	UnitID         string `json:"unit_id,omitempty"`
	UnitStatus     string `json:"unit_status,omitempty"`

	says string // the narration
}

// device is a field device publishing under one (agency, source_id) with its
// own monotonic sequence within a boot.
type device struct {
	agency, id string
	boot       int64
	seq        int64
}

func (d *device) next(r report) report {
	d.seq++
	r.Agency, r.SourceID, r.BootID, r.Sequence = d.agency, d.id, d.boot, d.seq
	return r
}

// topic is where a report is published: incidents/<agency>/<source>.
func (r report) topic() string { return "incidents/" + r.Agency + "/" + r.SourceID }

func (r report) payload() []byte {
	b, _ := json.Marshal(r) // strings and integers: never fails
	return b
}

// label names the report in the narration: fire/cad-1 #2.
func (r report) label() string {
	return fmt.Sprintf("%s/%s #%d", r.Agency, r.SourceID, r.Sequence)
}

// msgID identifies a report by what its producer controls.
type msgID struct {
	agency, source string
	boot, seq      int64
}

func (r report) id() msgID { return msgID{r.Agency, r.SourceID, r.BootID, r.Sequence} }

// story is the incident, in three acts: the first reports, held by the
// primary while the consumers are offline; the reports that follow while
// they are back; and the update published on the standby after the failover.
type story struct {
	held, live, after []report
}

func newStory() story {
	cad := &device{agency: "fire", id: "cad-1", boot: 3}
	ic := &device{agency: "fire", id: "ic-7", boot: 12}
	medic := &device{agency: "ems", id: "medic-3", boot: 5}
	return story{
		held: []report{
			cad.next(report{IncidentID: 7, IncidentStatus: "reported", says: "structure fire reported, 14 Harbour St"}),
			cad.next(report{IncidentID: 7, UnitID: "E7", UnitStatus: "assigned", says: "engine E7 assigned"}),
			ic.next(report{IncidentID: 7, CasualtyDelta: 2, says: "2 casualties"}),
			medic.next(report{IncidentID: 7, CasualtyDelta: 1, UnitID: "M3", UnitStatus: "on_scene", says: "ambulance M3 on scene: 1 more casualty"}),
		},
		live: []report{
			cad.next(report{IncidentID: 7, UnitID: "E7", UnitStatus: "available", says: "engine E7 released: available"}),
			medic.next(report{IncidentID: 7, UnitID: "M3", UnitStatus: "transporting", says: "M3 transporting"}),
		},
		after: []report{
			cad.next(report{IncidentID: 7, IncidentStatus: "under_control", says: "fire under control"}),
		},
	}
}

func (s story) all() []report {
	out := append([]report{}, s.held...)
	out = append(out, s.live...)
	return append(out, s.after...)
}

// picture is a common operating picture: entity -> field -> value as text.
type picture map[string]map[string]string

func (p picture) set(entity, field, value string) {
	if p[entity] == nil {
		p[entity] = map[string]string{}
	}
	p[entity][field] = value
}

// clone returns a copy of p.
func (p picture) clone() picture {
	out := picture{}
	for e, fs := range p {
		for f, v := range fs {
			out.set(e, f, v)
		}
	}
	return out
}

// apply runs a report's effects the way the demo's route does, without
// asking whether it was seen before: casualties add up, statuses are
// overwritten.
func (p picture) apply(r report) {
	inc := "incident/" + strconv.FormatInt(r.IncidentID, 10)
	if r.CasualtyDelta != 0 {
		n, _ := strconv.ParseInt(p[inc]["casualties"], 10, 64)
		p.set(inc, "casualties", strconv.FormatInt(n+r.CasualtyDelta, 10))
	}
	if r.IncidentStatus != "" {
		p.set(inc, "status", r.IncidentStatus)
	}
	if r.UnitID != "" && r.UnitStatus != "" {
		p.set("unit/"+r.UnitID, "status", r.UnitStatus)
	}
}

// truth is the picture of every report applied once, in order.
func (s story) truth() picture {
	p := picture{}
	for _, r := range s.all() {
		p.apply(r)
	}
	return p
}
