package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/source"
)

// Outcomes of an adoption of a gone member's session
// (Adoptions.Ended).
const (
	// AdoptionDrained: the session went quiet after its share group's
	// filters were unsubscribed; its member is out of the group.
	AdoptionDrained = "drained"
	// AdoptionTakenOver: the member returned and took its session back.
	AdoptionTakenOver = "taken_over"
	// AdoptionNoSession: the broker held no session for the member.
	AdoptionNoSession = "no_session"
	// AdoptionInterrupted: it ended before the session went quiet (a
	// connection lost, a stop, the timeout); it is tried again.
	AdoptionInterrupted = "interrupted"
)

// Adoptions counts the adoptions of the sessions of members gone while
// they held the share group's subscription, and the deliveries taken
// from those sessions.
type Adoptions struct {
	m          *Metrics
	ended      *prometheus.CounterVec
	deliveries prometheus.Counter
}

// Adoptions registers on reg the series of the adoptions of gone members'
// sessions: replayguard_share_adoptions_total{outcome} (one of the
// Adoption* outcomes, each present from 0) and
// replayguard_share_adopted_deliveries_total.
func (m *Metrics) Adoptions(reg prometheus.Registerer) *Adoptions {
	a := &Adoptions{
		m: m,
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "replayguard_share_adoptions_total",
			Help: "Adoptions of the MQTT session of a member gone while it held the share group's subscription, by how they ended: drained, taken_over (the member returned), no_session, interrupted (tried again).",
		}, []string{"outcome"}),
		deliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replayguard_share_adopted_deliveries_total",
			Help: "Deliveries received through the adopted sessions of gone members; they are counted in replayguard_received_total too.",
		}),
	}
	for _, o := range []string{AdoptionDrained, AdoptionTakenOver, AdoptionNoSession, AdoptionInterrupted} {
		a.ended.WithLabelValues(o)
	}
	reg.MustRegister(a.ended, a.deliveries)
	return a
}

// Ended counts an adoption that ended with outcome.
func (a *Adoptions) Ended(outcome string) { a.ended.WithLabelValues(outcome).Inc() }

// Observer returns the source.Observer of one adoption's consumer, which
// counts what it receives into *received: its deliveries, commits and
// acknowledgements count as the member's own; its connection does not
// (replayguard_broker_connected is the member's own connection's).
func (a *Adoptions) Observer(received *atomic.Uint64) source.Observer {
	return source.ObserverFunc(func(e source.Event) {
		switch e.Kind {
		case source.Connected, source.Disconnected, source.ConnectFailed, source.Stalled:
			return
		case source.Received:
			a.deliveries.Add(float64(e.N))
			received.Add(uint64(e.N))
		}
		a.m.Observe(e)
	})
}

// FeedObserver is Observer of an adoption on the path of feed (a feed of
// mqtt.feeds): its deliveries are the feed's too, audited under its name,
// and count in replayguard_feed_deliveries_total{feed}.
func (a *Adoptions) FeedObserver(feed string, received *atomic.Uint64) source.Observer {
	obs := a.Observer(received)
	return source.ObserverFunc(func(e source.Event) {
		if e.Kind == source.Received {
			a.m.feeds.deliveries.WithLabelValues(feed).Add(float64(e.N))
		}
		obs.Observe(e)
	})
}
