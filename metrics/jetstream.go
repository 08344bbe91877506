package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/source"
)

// JetStream returns an observer of the JetStream source that records its
// events in the metrics the MQTT consumers' feed (connections, received,
// commits, acks, abandoned), so that the accounting reads the same
// whichever source runs, counts its redeliveries in
// replayguard_redelivered_total, and the messages of the stream it never
// received and never will (a purge, a limit, the server moving the
// consumer past them, the stream deleted with them undecided) in
// replayguard_jetstream_lost_total. It registers
// those counters on reg.
func (m *Metrics) JetStream(reg prometheus.Registerer) source.Observer {
	redelivered := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "replayguard_redelivered_total",
		Help: "Deliveries the server flagged as delivered before (JetStream num_delivered > 1): recorded in the audit's dup field, never trusted.",
	})
	lost := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "replayguard_jetstream_lost_total",
		Help: "Messages of the JetStream stream never decided that nothing will deliver: removed by a purge or a limit before the consumer received them, passed over by the server, or taken undecided by the stream's deletion (while run consumed it, or, on an embedded or memory store, while it was stopped). An upper bound where jetstream.subjects takes part of the stream; the ERROR log names their stream sequences.",
	})
	reg.MustRegister(redelivered, lost)
	return source.ObserverFunc(func(e source.Event) {
		switch e.Kind {
		case source.Redelivered:
			redelivered.Add(float64(e.N))
			return
		case source.Lost:
			lost.Add(float64(e.N))
			return
		}
		m.Observe(e) // the JetStream source reports the MQTT consumers' events
	})
}
