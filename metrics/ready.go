package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchReady registers replayguard_ready on the registerer New was given:
// at every scrape it calls ready and reports 1 when it returns true, else
// 0. Pass the function /readyz answers from, so that the gauge and the
// probe never disagree; it is called from the scraping goroutine and must
// not block. Until WatchReady is called the gauge is absent; it panics
// when called twice.
func (m *Metrics) WatchReady(ready func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "replayguard_ready",
		Help: "1 while /readyz answers 200 (the source connected and committing, room in the outbox, no store loss), else 0.",
	}, func() float64 {
		if ready() {
			return 1
		}
		return 0
	}))
}
