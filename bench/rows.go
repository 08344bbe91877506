package main

import (
	"fmt"

	"github.com/replayguard/replayguard/internal/benchfeed"
)

// row is one line of the table: replayguard and its peers on the
// same messages.
type row struct {
	id, what string
	goal     float64 // the ratio replayguard should reach over the first peer
	sides    []side  // replayguard first, then the peers
}

// side is one tool in a row and its rounds.
type side struct {
	name    string // in the table
	short   string // on the progress line
	run     func(h *harness) result
	results []result
}

func sides(rows []row) int {
	n := 0
	for _, r := range rows {
		n += len(r.sides)
	}
	return n
}

// measure runs every side rounds times, alternating which goes first.
func (r *row) measure(rounds int, p *progress) {
	for round := range rounds {
		for k := range r.sides {
			i := k
			if round%2 == 1 {
				i = len(r.sides) - 1 - k
			}
			s := &r.sides[i]
			p.step(r.id, s.short, round+1, rounds)
			res := measure(r.id+"/"+s.name, s.run)
			s.results = append(s.results, res)
			p.result(res)
		}
	}
}

func buildRows(o options, feed, mqttFeed []benchfeed.Message, sp spFeed, m machineInfo, eb *engineBench, rg *built) []row {
	return []row{
		{id: "ingest", what: "durable dedup ingest", goal: 2, sides: []side{
			{short: "replayguard", name: "`replayguard bench` (embedded store, batches of 1000, fsync per commit; batches queued behind a commit share the next)",
				run: func(h *harness) result { return ingestReplayguard(h, rg, o, feed) }},
			{short: "JetStream", name: "NATS JetStream " + m.nats + " file store, async publish with `Nats-Msg-Id`, no per-message fsync",
				run: func(h *harness) result {
					return ingestJetStream(h, startNATS(h), feed)
				}},
		}},
		{id: "fleet", what: "durable dedup ingest, a source per meter", goal: 0.5, sides: []side{
			{short: "1 M sources", name: fmt.Sprintf("`replayguard bench` on %d updates from %d sources (embedded store)", o.fleetMessages, o.fleetSources),
				run: func(h *harness) result { return ingestFleet(h, rg, o, o.fleetSources) }},
			{short: "50 sources", name: fmt.Sprintf("the same on %d updates from 50 sources", o.fleetMessages),
				run: func(h *harness) result { return ingestFleet(h, rg, o, 50) }},
		}},
		{id: "live", what: "MQTT end to end, live feed", goal: 0.9, sides: []side{
			{short: "replayguard", name: "`replayguard run` (embedded store)", run: func(h *harness) result { return mqttReplayguard(h, mqttFeed, false) }},
			{short: "no-op paho", name: "no-op auto-acking paho consumer", run: func(h *harness) result { return mqttNoop(h, mqttFeed, false) }},
		}},
		{id: "backlog", what: "MQTT, backlog drain", goal: 0.85, sides: []side{
			{short: "replayguard", name: "`replayguard run` (embedded store)", run: func(h *harness) result { return mqttReplayguard(h, mqttFeed, true) }},
			{short: "no-op paho", name: "no-op auto-acking paho consumer", run: func(h *harness) result { return mqttNoop(h, mqttFeed, true) }},
		}},
		{id: "forward", what: "MQTT end to end, live feed, with a clean stream", goal: 0.8, sides: []side{
			{short: "with forward", name: "`replayguard run` with `- forward: {topic: \"clean/{topic}\"}` on its route, a downstream paho consumer on the same Mosquitto (embedded store)",
				run: func(h *harness) result { return mqttForward(h, mqttFeed) }},
			{short: "without", name: "`replayguard run` (embedded store)", run: func(h *harness) result { return mqttReplayguard(h, mqttFeed, false) }},
		}},
		{id: "redundant", what: "MQTT, backlog drain from two paths (distinct messages)", goal: 0.8, sides: []side{
			{short: "two paths", name: "`replayguard run` with `mqtt.feeds` a and b, each a Mosquitto holding the whole feed (embedded store)",
				run: func(h *harness) result { return mqttRedundant(h, mqttFeed) }},
			{short: "one path", name: "`replayguard run` on one Mosquitto holding the feed (embedded store)",
				run: func(h *harness) result { return mqttReplayguard(h, mqttFeed, true) }},
		}},
		{id: "mqtt311", what: "MQTT 3.1.1 end to end", goal: 0.8, sides: []side{
			{short: "replayguard", name: "`replayguard run` with `mqtt.protocol: 3.1.1` (embedded store)", run: func(h *harness) result { return mqtt311Replayguard(h, mqttFeed, false) }},
			{short: "no-op paho.mqtt.golang", name: "no-op auto-acking paho.mqtt.golang " + m.pahoMQTT + " consumer", run: func(h *harness) result { return mqtt311Noop(h, mqttFeed, false) }},
		}},
		{id: "mqtt311-backlog", what: "MQTT 3.1.1, backlog drain", goal: 0.8, sides: []side{
			{short: "replayguard", name: "`replayguard run` with `mqtt.protocol: 3.1.1` (embedded store)", run: func(h *harness) result { return mqtt311Replayguard(h, mqttFeed, true) }},
			{short: "no-op paho.mqtt.golang", name: "no-op auto-acking paho.mqtt.golang " + m.pahoMQTT + " consumer", run: func(h *harness) result { return mqtt311Noop(h, mqttFeed, true) }},
		}},
		{id: "jetstream", what: "JetStream end to end", goal: 0.8, sides: []side{
			{short: "replayguard", name: "`replayguard run`, input jetstream (embedded store)", run: func(h *harness) result { return jsReplayguard(h, mqttFeed) }},
			{short: "no-op pull", name: "no-op nats.go jetstream pull consumer, Ack per message", run: func(h *harness) result { return jsNoop(h, mqttFeed) }},
		}},
		spRow(sp, false),
		spRow(sp, true),
		{id: "engine", what: "decode + decide, one core", goal: 2, sides: []side{
			{short: "BenchmarkDecodeDecide", name: "`BenchmarkDecodeDecide` (engine/bench_test.go: decode, key, decide; no audit record, no store; a ring of 16,384 of its own 200-byte messages, every one past the first 16,384 decided a duplicate)",
				run: func(h *harness) result { return eb.run(h, len(feed)) }},
			{short: "Watermill id", name: "Watermill " + m.watermill + " `Deduplicator` keyed on a metadata id (no payload parse)",
				run: func(h *harness) result { return decideWatermill(h, feed, true) }},
		}},
		{id: "decide", what: "decode + decide + audit + in-memory commit, one core", goal: 2, sides: []side{
			{short: "replayguard", name: "engine on the in-memory store, batches of 1000",
				run: func(h *harness) result { return decideReplayguard(h, feed) }},
			{short: "Watermill id", name: "Watermill " + m.watermill + " `Deduplicator` keyed on a metadata id (no payload parse)",
				run: func(h *harness) result { return decideWatermill(h, feed, true) }},
			{short: "Watermill Adler-32", name: "Watermill " + m.watermill + " `Deduplicator` with its default Adler-32 payload hasher",
				run: func(h *harness) result { return decideWatermill(h, feed, false) }},
		}},
	}
}
