package demo

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/replayguard/replayguard/sparkplug"
)

// plantConfig is replayguard's configuration in the plant story: one
// Sparkplug route on the embedded store's defaults, summing each edge
// node's interval energy into its meter entity.
const plantConfig = `
store: {kind: embedded, path: '${DEMO_STORE}'}
mqtt:
  brokers: ['${DEMO_PRIMARY_LINK}', '${DEMO_STANDBY_LINK}']
  client_id: demo-replayguard
  session_expiry: 1h
routes:
  - name: plant
    kind: sparkplug
    topic: spBv1.0/plant/#
    effects:
      - entity: "meter/{topic[3]}"
        add: {kwh: metrics.Energy/kWh}
        set: {status: metrics.Status}
`

// The plant story's edge node, its metrics, and the readings of each
// session.
const (
	plantGroup   = "plant"
	plantEdge    = "meter-3"
	plantBdSeq   = 7 // the first session's
	energyMetric = "Energy/kWh"
	statusMetric = "Status"
	heldReadings = 4   // session 7, held by the primary
	liveReadings = 270 // session 8: its seq goes 255 → 0 on the way
	lastReadings = 3   // session 9, on the standby
)

// intervalKWh are the meter's interval readings, in turn.
var intervalKWh = []string{"0.25", "0.3", "0.15", "0.25", "0.35", "0.25", "0.2", "0.3"}

// meter is the plant's energy meter behind its Sparkplug B edge node: it
// numbers its sessions and messages with sparkplug.Edge, and keeps its own
// register of the energy it reported: the truth.
type meter struct {
	edge     *sparkplug.Edge
	clock    time.Time
	seq      int64 // the session's last message's seq, unwrapped
	readings int
	register string
}

// birth opens the edge node's current session: an NBIRTH naming every
// metric with its alias (Energy/kWh 1, Status 2).
func (m *meter) birth(says string) feedMsg {
	m.clock, m.seq = m.clock.Add(time.Second), 0
	msg := m.edge.Birth(m.clock, []sparkplug.Metric{
		{Name: energyMetric, Datatype: sparkplug.Double, Value: 0.0},
		{Name: statusMetric, Datatype: sparkplug.String, Value: "running"},
	})
	return m.feed(msg, fmt.Sprintf("NBIRTH bdSeq %d", m.edge.BdSeq()), says)
}

// reading is an NDATA of the next interval's energy, by alias; says is
// its line, or "" for none.
func (m *meter) reading(says func(raw uint64, kwh string) string) feedMsg {
	kwh := intervalKWh[m.readings%len(intervalKWh)]
	m.readings++
	m.register, _ = addDecimal(m.register, kwh) // canonical decimals: never fails
	f, _ := strconv.ParseFloat(kwh, 64)
	m.clock = m.clock.Add(time.Second)
	m.seq++
	raw := m.edge.Seq()
	msg := m.edge.Data(m.clock, []sparkplug.Metric{{Name: energyMetric, Datatype: sparkplug.Double, Value: f}})
	return m.feed(msg, fmt.Sprintf("NDATA seq %d", raw), says(raw, kwh))
}

func (m *meter) feed(msg sparkplug.Message, label, says string) feedMsg {
	return feedMsg{topic: msg.Topic, payload: msg.Payload, label: label, says: says,
		id: msgID{source: plantGroup + "/" + plantEdge, epoch: strconv.FormatUint(m.edge.BdSeq(), 10), seq: m.seq}}
}

// session is a birth and n readings.
func (m *meter) session(birth string, n int, says func(raw uint64, kwh string) string) []feedMsg {
	out := []feedMsg{m.birth(birth)}
	for range n {
		out = append(out, m.reading(says))
	}
	return out
}

func byAlias(_ uint64, kwh string) string { return energyMetric + " " + kwh + ", by alias 1" }

// newPlantStory is the meter's shift in three sessions: session 7's birth
// and first readings, held by the primary while the consumers are offline;
// session 8, opened when the primary's checkpoint restart ended the edge
// node's connection, its seq wrapping 255 → 0; and session 9 on the
// standby.
func newPlantStory() story {
	m := &meter{edge: sparkplug.NewEdge(plantGroup, plantEdge, plantBdSeq), clock: time.Now().Add(-time.Hour).Truncate(time.Second)}
	held := m.session(plantEdge+" online: "+energyMetric+" alias 1, "+statusMetric+" alias 2 = running", heldReadings, byAlias)
	m.edge.NewSession()
	n := 0
	live := m.session(plantEdge+" back after the restart: a new session, a new bdSeq, seq from 0", liveReadings, func(raw uint64, kwh string) string {
		n++
		switch {
		case n == 1:
			return byAlias(raw, kwh) + "; then one reading after another, without a pause"
		case raw == 255:
			return "the last seq before the wrap; replayguard's sequence 255"
		case raw == 0:
			return "seq wraps 255 → 0; replayguard unwraps it to sequence 256 of session 8"
		case n == liveReadings:
			return fmt.Sprintf("reading %d of session 8; replayguard's sequence %d", n, n)
		}
		return ""
	})
	m.edge.NewSession()
	after := m.session(plantEdge+" reconnects after the failover: a new session, bdSeq 9", lastReadings, byAlias)
	return story{
		name: StoryPlant, noun: "message", link: "site link", filter: "spBv1.0/" + plantGroup + "/#", config: plantConfig,
		producer: "demo-edge-" + plantEdge, connected: true, held: held, live: live, after: after,
		title:        "replayguard demo --story plant: an energy meter over Sparkplug B, a broker failover, and a standby that replays readings already billed",
		pictureTitle: "The meter after the failover:", truthColumn: "truth (the meter's own register)", lineage: "meter/" + plantEdge,
		newApplier: func() applier { return newMeterHost() },
		truth:      picture{"meter/" + plantEdge: {"kwh": m.register, "status": "running"}},
		intro:      plantIntro, restarted: plantRestarted, replayed: plantReplayed, notice: plantNotice,
	}
}

// meterHost is the naive consumer's Sparkplug host application: it keeps
// each edge node's aliases from its last NBIRTH and bills the Energy/kWh of
// every NBIRTH and NDATA it is handed to meter/<edge>, as replayguard's
// route does, but without asking whether it was seen before.
type meterHost struct {
	aliases map[string]map[uint64]string // edge -> alias -> metric name
}

func newMeterHost() *meterHost { return &meterHost{aliases: map[string]map[uint64]string{}} }

func (h *meterHost) apply(p picture, topic string, payload []byte) {
	levels := strings.Split(topic, "/")
	if len(levels) != 4 || levels[0] != "spBv1.0" || (levels[2] != "NBIRTH" && levels[2] != "NDATA") {
		return
	}
	pl, err := sparkplug.Decoder{}.DecodeSparkplug(payload)
	if err != nil {
		return
	}
	edge := levels[3]
	if levels[2] == "NBIRTH" {
		table := map[uint64]string{}
		for _, mt := range pl.Metrics {
			if mt.HasAlias {
				table[mt.Alias] = mt.Name
			}
		}
		h.aliases[edge] = table
	}
	for _, mt := range pl.Metrics {
		name := mt.Name
		if name == "" {
			name = h.aliases[edge][mt.Alias]
		}
		switch name {
		case energyMetric:
			p.add("meter/"+edge, "kwh", mt.Value.Text)
		case statusMetric:
			p.set("meter/"+edge, "status", mt.Value.Text)
		}
	}
}
