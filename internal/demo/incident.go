package demo

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// incidentConfig is replayguard's configuration in the incident story: the
// incidents route of examples/replayguard.yaml with a forward effect, the
// embedded store, the consumer's persistent session through the dispatch
// link, and the clean stream's output on the COP broker.
const incidentConfig = `
store: {kind: embedded, path: '${DEMO_STORE}'}
mqtt:
  brokers: ['${DEMO_PRIMARY_LINK}', '${DEMO_STANDBY_LINK}']
  client_id: demo-replayguard
  session_expiry: 1h
outputs:
  mqtt: {brokers: ['${DEMO_COP_BROKER}']}   # client id: demo-replayguard-out
` + incidentRoutes + `      - forward: {topic: "clean/{topic}"}
`

// incidentRoutes is the incidents route of examples/replayguard.yaml, its
// effects list last, open for a story to add one.
const incidentRoutes = `routes:
  - name: incidents
    topic: incidents/#
    source: [agency, source_id]
    sequence: sequence
    epoch: boot_id
    effects:
      - entity: "incident/{incident_id}"
        add: {casualties: casualty_delta}
        set: {status: incident_status}
      - entity: "unit/{unit_id}"
        set: {status: unit_status}
`

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

// next numbers r and makes it the message the field gateway publishes, at
// incidents/<agency>/<source>.
func (d *device) next(r report) feedMsg {
	d.seq++
	r.Agency, r.SourceID, r.BootID, r.Sequence = d.agency, d.id, d.boot, d.seq
	b, _ := json.Marshal(r) // strings and integers: never fails
	return feedMsg{topic: "incidents/" + r.Agency + "/" + r.SourceID, payload: b,
		id:    msgID{source: r.Agency + "/" + r.SourceID, epoch: strconv.FormatInt(r.BootID, 10), seq: r.Sequence},
		label: fmt.Sprintf("%s/%s #%d", r.Agency, r.SourceID, r.Sequence), says: r.says}
}

// newIncidentStory is the structure fire, in three acts: the first reports,
// held by the primary while the consumers are offline; the reports that
// follow while they are back; and the update published on the standby
// after the failover.
func newIncidentStory() story {
	cad := &device{agency: "fire", id: "cad-1", boot: 3}
	ic := &device{agency: "fire", id: "ic-7", boot: 12}
	medic := &device{agency: "ems", id: "medic-3", boot: 5}
	s := story{
		name: StoryIncident, noun: "report", link: "dispatch link", filter: "incidents/#", config: incidentConfig, clean: true,
		producer:     "demo-field-gateway",
		title:        "replayguard demo: a structure fire, a broker failover, and a standby that replays what was already applied",
		pictureTitle: "The common operating picture after the failover:", truthColumn: "truth (each report once)", lineage: "incident/7",
		newApplier: func() applier { return incidentApplier{} },
		held: []feedMsg{
			cad.next(report{IncidentID: 7, IncidentStatus: "reported", says: "structure fire reported, 14 Harbour St"}),
			cad.next(report{IncidentID: 7, UnitID: "E7", UnitStatus: "assigned", says: "engine E7 assigned"}),
			ic.next(report{IncidentID: 7, CasualtyDelta: 2, says: "2 casualties"}),
			medic.next(report{IncidentID: 7, CasualtyDelta: 1, UnitID: "M3", UnitStatus: "on_scene", says: "ambulance M3 on scene: 1 more casualty"}),
		},
		live: []feedMsg{
			cad.next(report{IncidentID: 7, UnitID: "E7", UnitStatus: "available", says: "engine E7 released: available"}),
			medic.next(report{IncidentID: 7, UnitID: "M3", UnitStatus: "transporting", says: "M3 transporting"}),
		},
		after: []feedMsg{
			cad.next(report{IncidentID: 7, IncidentStatus: "under_control", says: "fire under control"}),
		},
	}
	s.truth = truthOf(incidentApplier{}, s.all())
	return s
}

// incidentApplier applies a report's effects the way the incidents route
// does: casualties add up, statuses are overwritten.
type incidentApplier struct{}

func (incidentApplier) apply(p picture, _ string, payload []byte) {
	var r report
	if json.Unmarshal(payload, &r) != nil {
		return
	}
	inc := "incident/" + strconv.FormatInt(r.IncidentID, 10)
	if r.CasualtyDelta != 0 {
		p.add(inc, "casualties", strconv.FormatInt(r.CasualtyDelta, 10))
	}
	if r.IncidentStatus != "" {
		p.set(inc, "status", r.IncidentStatus)
	}
	if r.UnitID != "" && r.UnitStatus != "" {
		p.set("unit/"+r.UnitID, "status", r.UnitStatus)
	}
}
