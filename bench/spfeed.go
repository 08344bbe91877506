package main

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"time"

	"github.com/replayguard/replayguard/sparkplug"
)

// The Sparkplug rows' feed: edges Sparkplug B edge nodes of one group,
// each with one session (an NBIRTH naming 8 metrics with their aliases),
// then NDATA round-robin over the edges, every metric by alias, seq
// wrapping past 255 many times over. Like internal/benchfeed's, some
// messages are delivered a second time, byte for byte, in failover bursts.
// Generation is deterministic.

const (
	spGroup     = "bench"
	spEdges     = 10
	spTopicRoot = "spBv1.0/" + spGroup + "/#"
)

// spDelivery is one delivery of the Sparkplug feed.
type spDelivery struct {
	sparkplug.Message
	Edge     int   // the edge node, 0 … edges-1 (edge-%02d)
	Quarters int64 // the Energy metric, in quarters of a kWh
	Replay   bool  // a second delivery of an earlier message
}

// spFeed is the feed: its first edges deliveries are the NBIRTHs, one per
// edge, in edge order; the rest are NDATA and their replays.
type spFeed struct {
	msgs  []spDelivery
	edges int
}

// spBirthMetrics are an edge's metrics as its NBIRTH names them (aliases
// 1 to 8, in this order).
func spBirthMetrics(edge int) []sparkplug.Metric {
	return []sparkplug.Metric{
		{Name: "Energy", Datatype: sparkplug.Double, Value: 0.0},
		{Name: "Temperature", Datatype: sparkplug.Int32, Value: int64(20)},
		{Name: "Voltage", Datatype: sparkplug.Double, Value: 230.0},
		{Name: "Current", Datatype: sparkplug.Float, Value: float32(12.5)},
		{Name: "Power", Datatype: sparkplug.Double, Value: 2875.0},
		{Name: "Pulses", Datatype: sparkplug.UInt64, Value: uint64(0)},
		{Name: "Running", Datatype: sparkplug.Boolean, Value: true},
		{Name: "Node Control/State", Datatype: sparkplug.String, Value: fmt.Sprintf("line %d running", edge)},
	}
}

// spDataMetrics are the metrics of an edge's n-th NDATA (n from 1); Energy
// is quarters/4 kWh, between 0 and 1.75.
func spDataMetrics(n int64, quarters int64, temp int64) []sparkplug.Metric {
	return []sparkplug.Metric{
		{Name: "Energy", Value: float64(quarters) / 4},
		{Name: "Temperature", Datatype: sparkplug.Int32, Value: temp},
		{Name: "Voltage", Value: 229.5 + float64(n%10)/10},
		{Name: "Current", Value: float32(12 + n%5)},
		{Name: "Power", Value: float64(2700 + n%300)},
		{Name: "Pulses", Value: uint64(n * 4)},
		{Name: "Running", Value: n%50 != 0},
		{Name: "Node Control/State", Value: "running"},
	}
}

// generateSparkplug returns a feed of n deliveries from edges edge nodes:
// their NBIRTHs, then NDATA round-robin, each delivered again later with
// probability replays (held, and sent back in bursts as after a failover,
// and at the end).
func generateSparkplug(n, edges int, replays float64) spFeed {
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := spFeed{msgs: make([]spDelivery, 0, n+edges), edges: edges}
	nodes := make([]*sparkplug.Edge, edges)
	for i := range nodes {
		nodes[i] = sparkplug.NewEdge(spGroup, spEdgeName(i), uint64(i*37))
		m := nodes[i].Birth(base, spBirthMetrics(i))
		f.msgs = append(f.msgs, spDelivery{Message: m, Edge: i})
	}
	var held []spDelivery
	for i := 0; len(f.msgs) < n; i++ {
		edge, k := i%edges, int64(i/edges+1)
		q, temp := rng.Int64N(8), -10+rng.Int64N(40)
		ts := base.Add(time.Duration(i+1) * time.Millisecond) // later than the birth, and than the edge's previous
		d := spDelivery{Message: nodes[edge].Data(ts, spDataMetrics(k, q, temp)), Edge: edge, Quarters: q}
		f.msgs = append(f.msgs, d)
		if rng.Float64() < replays {
			d.Replay = true
			held = append(held, d)
		}
		if len(held) > 0 && rng.IntN(100) == 0 { // a failover burst
			f.msgs = append(f.msgs, held...)
			held = held[:0]
		}
	}
	f.msgs = append(f.msgs, held...)
	f.msgs = f.msgs[:min(n, len(f.msgs))]
	return f
}

func spEdgeName(i int) string { return fmt.Sprintf("edge-%02d", i) }

// unique counts the distinct messages of the feed.
func (f spFeed) unique() int {
	n := 0
	for i := range f.msgs {
		if !f.msgs[i].Replay {
			n++
		}
	}
	return n
}

// energy is each edge's Energy summed over its distinct messages, in kWh:
// what replayguard's route must add up, by entity.
func (f spFeed) energy() map[string]*big.Rat {
	out := make(map[string]*big.Rat, f.edges)
	for i := range f.edges {
		out["meter/"+spEdgeName(i)] = new(big.Rat)
	}
	for i := range f.msgs {
		if d := &f.msgs[i]; !d.Replay {
			out["meter/"+spEdgeName(d.Edge)].Add(out["meter/"+spEdgeName(d.Edge)], big.NewRat(d.Quarters, 4))
		}
	}
	return out
}
