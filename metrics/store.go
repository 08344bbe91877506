package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/engine"
)

var (
	storeLabels       = []string{"store", "member"}
	descStoreUpdates  = prometheus.NewDesc("replayguard_store_updates_total", "Batches this member wrote to the shared store.", storeLabels, nil)
	descStoreRetries  = prometheus.NewDesc("replayguard_store_retries_total", "Batches decided again because another member changed a row first (a lost insert, a version changed, a serialisation failure, a deadlock).", storeLabels, nil)
	descStoreFailures = prometheus.NewDesc("replayguard_store_update_failures_total", "Store updates that failed: nothing of them was acknowledged. When the store's answer was lost the write may have landed; its deliveries are then decided again, as duplicates.", storeLabels, nil)
	descStoreSeconds  = prometheus.NewDesc("replayguard_store_update_seconds_total", "Time spent in store updates that wrote, reading, deciding and committing.", storeLabels, nil)
	descStoreRows     = prometheus.NewDesc("replayguard_store_records_total", "Audit records written to the shared store: divided by updates, the mean batch size.", storeLabels, nil)
	descStoreWaits    = prometheus.NewDesc("replayguard_store_lock_waits_total", "Row lock waits, where the store shows them.", storeLabels, nil)
	descStoreHeld     = prometheus.NewDesc("replayguard_store_held_rows_total", "Rows a batch found held by another member's batch and did not wait for: the messages that touch them were decided in a batch after it (PostgreSQL).", storeLabels, nil)
	descStoreDurable  = prometheus.NewDesc("replayguard_store_durable", "1 when the shared store's server commits durably; 0 when it was accepted through store.allow_not_durable.", storeLabels, nil)
	descStoreLease    = prometheus.NewDesc("replayguard_store_lease_expiry_timestamp_seconds", "When this member's lease on its id ends unless renewed.", storeLabels, nil)
	descStoreAsync    = prometheus.NewDesc("replayguard_store_async_replication", "1 when the shared store's server replicates without making commits wait for a replica, accepted through store.allow_async_replication: a failover can lose acknowledged commits, which the journal recovers.", storeLabels, nil)
	descStoreClock    = prometheus.NewDesc("replayguard_store_clock_offset_seconds", "This member's clock less the shared store server's, as its last lease renewal measured it (within half the round trip): its audit records carry its wall time; the group's keys age by the server's clock.", storeLabels, nil)
	descStoreBehind   = prometheus.NewDesc("replayguard_store_loss", "1 while this member has found the shared store without commits it made and acknowledged (a failover to a replica that lacked them), and decides nothing until they are recovered or accepted as lost.", storeLabels, nil)
	descStoreLosses   = prometheus.NewDesc("replayguard_store_losses_total", "Times this member found the shared store without commits it had made and acknowledged.", storeLabels, nil)
	descStoreRecover  = prometheus.NewDesc("replayguard_store_recovered_total", "Deliveries the store had lost that this member decided again from its journal (they are also counted in replayguard_decisions_total, but not in replayguard_received_total).", storeLabels, nil)
	descStoreAccepted = prometheus.NewDesc("replayguard_store_losses_accepted_total", "Store losses an operator accepted (positions no journal held).", storeLabels, nil)
	descJournalBytes  = prometheus.NewDesc("replayguard_journal_bytes", "Bytes this member's journal holds on the local disk (store.journal).", storeLabels, nil)
	descJournalOldest = prometheus.NewDesc("replayguard_journal_oldest_timestamp_seconds", "When the oldest batch this member's journal holds was committed: how far back a store failover can be recovered.", storeLabels, nil)
)

// JournalSizer is a member's journal as the metrics read it.
type JournalSizer interface {
	Size() (bytes int64, oldest time.Time)
}

// journalCollector reads a member's journal size at scrape time.
type journalCollector struct {
	kind, member string
	j            JournalSizer
}

// WatchJournal adds the size of a shared-store member's journal to the
// metrics.
func (m *Metrics) WatchJournal(kind, member string, j JournalSizer) {
	m.collectors = append(m.collectors, journalCollector{kind, member, j})
}

func (c journalCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descJournalBytes
	ch <- descJournalOldest
}

func (c journalCollector) Collect(ch chan<- prometheus.Metric) {
	n, oldest := c.j.Size()
	ch <- prometheus.MustNewConstMetric(descJournalBytes, prometheus.GaugeValue, float64(n), c.kind, c.member)
	if !oldest.IsZero() {
		ch <- prometheus.MustNewConstMetric(descJournalOldest, prometheus.GaugeValue, float64(oldest.UnixNano())/1e9, c.kind, c.member)
	}
}

// LossReporter is the engine's account of store losses.
type LossReporter interface {
	Loss() *engine.StoreLoss
	LossStats() engine.LossStats
}

// lossCollector reads a member's store-loss counters at scrape time.
type lossCollector struct {
	kind, member string
	r            LossReporter
}

// WatchLoss adds the store-loss gauges and counters of a member of a
// shared store to the metrics.
func (m *Metrics) WatchLoss(kind, member string, r LossReporter) {
	m.collectors = append(m.collectors, lossCollector{kind, member, r})
}

func (c lossCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStoreBehind, descStoreLosses, descStoreRecover, descStoreAccepted} {
		ch <- d
	}
}

func (c lossCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.r.LossStats()
	behind := 0.0
	if c.r.Loss() != nil {
		behind = 1
	}
	ch <- prometheus.MustNewConstMetric(descStoreBehind, prometheus.GaugeValue, behind, c.kind, c.member)
	ch <- prometheus.MustNewConstMetric(descStoreLosses, prometheus.CounterValue, float64(st.Detected), c.kind, c.member)
	ch <- prometheus.MustNewConstMetric(descStoreRecover, prometheus.CounterValue, float64(st.Recovered), c.kind, c.member)
	ch <- prometheus.MustNewConstMetric(descStoreAccepted, prometheus.CounterValue, float64(st.Accepted), c.kind, c.member)
}

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
		descStoreRows, descStoreWaits, descStoreHeld, descStoreDurable, descStoreLease, descStoreAsync, descStoreClock} {
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
	counter(descStoreHeld, float64(st.HeldRows))
	durable := 0.0
	if st.Durable {
		durable = 1
	}
	ch <- prometheus.MustNewConstMetric(descStoreDurable, prometheus.GaugeValue, durable, c.kind, c.member)
	async := 0.0
	if st.AsyncReplication != "" {
		async = 1
	}
	ch <- prometheus.MustNewConstMetric(descStoreAsync, prometheus.GaugeValue, async, c.kind, c.member)
	if !st.LeaseExpires.IsZero() {
		ch <- prometheus.MustNewConstMetric(descStoreLease, prometheus.GaugeValue, float64(st.LeaseExpires.UnixNano())/1e9, c.kind, c.member)
	}
	if !st.ClockMeasured.IsZero() {
		ch <- prometheus.MustNewConstMetric(descStoreClock, prometheus.GaugeValue, st.ClockOffset.Seconds(), c.kind, c.member)
	}
}
