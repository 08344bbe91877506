package sink

import "github.com/prometheus/client_golang/prometheus"

var (
	descBacklog = prometheus.NewDesc("replayguard_audit_sink_backlog_records",
		"Committed audit records a sink has not yet delivered: the chain head minus its cursor.", []string{"sink"}, nil)
	descDelivered = prometheus.NewDesc("replayguard_audit_sink_delivered_total",
		"Audit records a sink delivered (a record delivered again after a failure counts again).", []string{"sink"}, nil)
	descFailures = prometheus.NewDesc("replayguard_audit_sink_failures_total",
		"Failed deliveries of a sink; each is retried from its cursor.", []string{"sink"}, nil)
	descOversize = prometheus.NewDesc("replayguard_audit_sink_oversize_total",
		"Audit records a syslog sink sent as a stub, their whole message being over its max_message (a batch sent again counts again).", []string{"sink"}, nil)
)

// Describe implements prometheus.Collector.
func (s *Set) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBacklog
	ch <- descDelivered
	ch <- descFailures
	ch <- descOversize
}

// Collect implements prometheus.Collector: the figures are read at scrape
// time.
func (s *Set) Collect(ch chan<- prometheus.Metric) {
	for i, st := range s.Status() {
		ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(st.Backlog), st.Name)
		ch <- prometheus.MustNewConstMetric(descDelivered, prometheus.CounterValue, float64(st.Delivered), st.Name)
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(st.Failures), st.Name)
		if _, ok := s.sinks[i].Exporter.(oversizer); ok {
			ch <- prometheus.MustNewConstMetric(descOversize, prometheus.CounterValue, float64(st.Oversize), st.Name)
		}
	}
}
