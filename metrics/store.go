package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
)

var (
	storeLabels       = []string{"store", "member"}
	descStoreUpdates  = prometheus.NewDesc("replayguard_store_updates_total", "Batches this member wrote to the shared store.", storeLabels, nil)
	descStoreRetries  = prometheus.NewDesc("replayguard_store_retries_total", "Batches decided again because another member changed a row first (a lost insert, a version changed, a serialisation failure).", storeLabels, nil)
	descStoreFailures = prometheus.NewDesc("replayguard_store_update_failures_total", "Store updates that failed: nothing of them was acknowledged. When the store's answer was lost the write may have landed; its deliveries are then decided again, as duplicates.", storeLabels, nil)
	descStoreSeconds  = prometheus.NewDesc("replayguard_store_update_seconds_total", "Time spent in store updates that wrote, reading, deciding and committing.", storeLabels, nil)
	descStoreRows     = prometheus.NewDesc("replayguard_store_records_total", "Audit records written to the shared store: divided by updates, the mean batch size.", storeLabels, nil)
	descStoreWaits    = prometheus.NewDesc("replayguard_store_lock_waits_total", "Row lock waits, where the store shows them.", storeLabels, nil)
	descStoreDurable  = prometheus.NewDesc("replayguard_store_durable", "1 when the shared store's server commits durably; 0 when it was accepted through store.allow_not_durable.", storeLabels, nil)
	descStoreLease    = prometheus.NewDesc("replayguard_store_lease_expiry_timestamp_seconds", "When this member's lease on its id ends unless renewed.", storeLabels, nil)
)

// storeCollector reads a shared store's counters at scrape time.
type storeCollector struct {
	kind, member string
	s            engine.StatsReporter
}

// WatchStore adds the counters of a shared store (kind: postgres, redis)
// to the metrics, labelled with the store kind and this member's id.
func (m *Metrics) WatchStore(kind, member string, s engine.StatsReporter) {
	m.collectors = append(m.collectors, storeCollector{kind, member, s})
}

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStoreUpdates, descStoreRetries, descStoreFailures, descStoreSeconds,
		descStoreRows, descStoreWaits, descStoreDurable, descStoreLease} {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.SharedStats()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, c.kind, c.member)
	}
	counter(descStoreUpdates, float64(st.Updates))
	counter(descStoreRetries, float64(st.Retries))
	counter(descStoreFailures, float64(st.Failures))
	counter(descStoreSeconds, st.UpdateSeconds)
	counter(descStoreRows, float64(st.Rows))
	counter(descStoreWaits, float64(st.LockWaits))
	durable := 0.0
	if st.Durable {
		durable = 1
	}
	ch <- prometheus.MustNewConstMetric(descStoreDurable, prometheus.GaugeValue, durable, c.kind, c.member)
	if !st.LeaseExpires.IsZero() {
		ch <- prometheus.MustNewConstMetric(descStoreLease, prometheus.GaugeValue, float64(st.LeaseExpires.UnixNano())/1e9, c.kind, c.member)
	}
}
