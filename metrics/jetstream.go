package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/source"
)

// JetStream returns an observer of the JetStream source that records its
// events in the metrics the MQTT consumers' feed (connections, received,
// commits, acks, abandoned), so that the accounting reads the same
// whichever source runs, and counts its redeliveries in
// replayguard_redelivered_total. It registers that counter on reg.
func (m *Metrics) JetStream(reg prometheus.Registerer) source.Observer {
	redelivered := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "replayguard_redelivered_total",
		Help: "Deliveries the server flagged as delivered before (JetStream num_delivered > 1): recorded in the audit's dup field, never trusted.",
	})
	reg.MustRegister(redelivered)
	return source.ObserverFunc(func(e source.Event) {
		if e.Kind == source.Redelivered {
			redelivered.Add(float64(e.N))
			return
		}
		m.Observe(e) // the JetStream source reports the MQTT consumers' events
	})
}
