// Package benchfeed generates the benchmark feed: incident updates of about
// 280 bytes from many producers, each with its own sequence, some of them
// delivered a second time in failover bursts. Each update adds to an
// incident's casualties and sets its producer's unit status (see
// Incident for which incident). `replayguard bench` ingests
// it; the peer benchmarks in bench/ give the same messages to replayguard
// and to what a user would pick instead. Generation is deterministic and
// the package holds no state: it is safe for concurrent use.
package benchfeed

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"strconv"
)

// Route is the configuration of the feed's route; %q is the embedded
// store's path.
const Route = `
store: {kind: embedded, path: %q}
routes:
  - name: incidents
    topic: incidents/#
    source: [agency, source_id]
    sequence: sequence
    epoch: boot_id
    effects:
      - entity: "incident/{incident_id}"
        add: {casualties: casualty_delta}
      - entity: "unit/{unit_id}"
        set: {status: unit_status}
`

// Agency is the agency of every producer in the feed; its epoch (boot_id)
// is always 1.
const Agency = "county-fire"

// Message is one delivery of the feed.
type Message struct {
	Topic   string
	Payload []byte
	Source  int   // the producer, 0 … sources-1 (source_id mdt-%03d)
	Seq     int64 // the producer's sequence, from 1
	Unique  int   // index of the update among the distinct ones, from 0
	Replay  bool  // a second delivery of an earlier update
}

// Key is the idempotency key a producer would attach to the message:
// agency, source, epoch and sequence.
func (m *Message) Key() string {
	return Agency + "/mdt-" + fmt.Sprintf("%03d", m.Source) + "/1/" + strconv.FormatInt(m.Seq, 10)
}

// SharedIncidents is the most producers a feed has whose producers all
// report on the same incidents: up to it, every producer's update with
// sequence seq is about incident seq%97, as the feed always was.
const SharedIncidents = 50

// Incident is the number of the incident (incident_id INC-%04d) that the
// update with sequence seq of producer source is about, in a feed of
// sources producers. With up to SharedIncidents producers it is seq%97 for
// all of them: producers at the same sequence, as round-robin producers
// are, report on the same incident, and every batch adds to that one row.
// With more, each producer works incidents of its own, one at a time, the
// next one every 97 updates (97·source + seq/97%97), as units on separate
// calls do: two producers never share an incident, so batches of different
// members share a row only where they share a producer.
func Incident(source int, seq int64, sources int) int64 {
	if sources <= SharedIncidents {
		return seq % 97
	}
	return 97*int64(source) + seq/97%97
}

// Generate returns n distinct updates round-robin over the sources, each
// delivered again later with probability replays: the held updates come
// back in bursts, as after a failover, and at the end.
func Generate(n, sources int, replays float64) []Message {
	out := make([]Message, 0, n+int(float64(n)*replays)+1)
	for m := range Each(n, sources, replays) {
		out = append(out, m)
	}
	return out
}

// Each yields the messages Generate returns, one at a time, holding only
// the updates waiting to be delivered again.
func Each(n, sources int, replays float64) iter.Seq[Message] {
	return func(yield func(Message) bool) {
		rng := rand.New(rand.NewPCG(1, 2))
		var held []Message
		seq := make([]int64, sources)
		for i := 0; i < n; i++ {
			s := i % sources
			seq[s]++
			m := Message{Topic: fmt.Sprintf("incidents/%s/mdt-%03d", Agency, s), Source: s, Seq: seq[s], Unique: i}
			m.Payload = fmt.Appendf(nil, `{"agency":%q,"source_id":"mdt-%03d",`+
				`"boot_id":1,"sequence":%d,"incident_id":"INC-%04d","unit_id":"E%d","unit_status":"enroute","casualty_delta":%d,`+
				`"lat":38.8977,"lon":-77.0365,"note":"structure fire, 2nd alarm"}`, Agency, s, seq[s], Incident(s, seq[s], sources), s, rng.IntN(2))
			if !yield(m) {
				return
			}
			if rng.Float64() < replays {
				m.Replay = true
				held = append(held, m)
			}
			if len(held) > 0 && rng.IntN(100) == 0 { // a failover burst
				for _, h := range held {
					if !yield(h) {
						return
					}
				}
				held = held[:0]
			}
		}
		for _, h := range held {
			if !yield(h) {
				return
			}
		}
	}
}

// Capture renders messages as capture lines (one JSON object a line with
// the topic and the payload), the input of `replayguard ingest`.
func Capture(msgs []Message) []byte {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Topic) + len(msgs[i].Payload) + len(`{"topic":"","payload":}`+"\n")
	}
	b := make([]byte, 0, n)
	for i := range msgs {
		b = AppendLine(b, &msgs[i])
	}
	return b
}

// AppendLine appends m's capture line to b.
func AppendLine(b []byte, m *Message) []byte {
	b = append(b, `{"topic":"`...)
	b = append(b, m.Topic...)
	b = append(b, `","payload":`...)
	b = append(b, m.Payload...)
	return append(b, "}\n"...)
}

// Unique counts the distinct updates among msgs.
func Unique(msgs []Message) int {
	n := 0
	for i := range msgs {
		if !msgs[i].Replay {
			n++
		}
	}
	return n
}
