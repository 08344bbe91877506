package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/source/jetstream"
)

// JetStream returns an observer of the JetStream source that records its
// events in the metrics the MQTT consumer's feed (connections, received,
// commits, acks, abandoned), so that the accounting reads the same
// whichever source runs, and counts its redeliveries in
// replayguard_redelivered_total. It registers that counter on reg.
func (m *Metrics) JetStream(reg prometheus.Registerer) jetstream.Observer {
	redelivered := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "replayguard_redelivered_total",
		Help: "Deliveries the server flagged as delivered before (JetStream num_delivered > 1): recorded in the audit's dup field, never trusted.",
	})
	reg.MustRegister(redelivered)
	return jetstream.ObserverFunc(func(e jetstream.Event) {
		if e.Kind == jetstream.Redelivered {
			redelivered.Add(float64(e.N))
			return
		}
		m.Observe(e) // the JetStream source reports the MQTT consumer's events
	})
}
