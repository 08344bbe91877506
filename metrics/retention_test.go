package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replayguard/replayguard/metrics"
)

// A pass counts each chain it failed on, and says how many the last one
// failed on; only a pass that failed on none moves the time of the last
// success, which is absent until one did.
func TestRetentionCountsFailedChainsAndTimesTheLastSuccess(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r := metrics.NewRetention(reg)
	const failures = `
# HELP replayguard_audit_retention_failures_total Audit retention passes that failed, once per chain a pass failed on; the next pass tries again while the store keeps every record.
# TYPE replayguard_audit_retention_failures_total counter
replayguard_audit_retention_failures_total %s
`
	const success = `
# HELP replayguard_audit_retention_last_success_timestamp_seconds When the last audit retention pass that failed on no chain ended; absent until one did.
# TYPE replayguard_audit_retention_last_success_timestamp_seconds gauge
replayguard_audit_retention_last_success_timestamp_seconds %s
`
	const failing = `
# HELP replayguard_audit_retention_failing_chains Chains the last audit retention pass failed on; 0 before the first pass and after one that failed on none.
# TYPE replayguard_audit_retention_failing_chains gauge
replayguard_audit_retention_failing_chains %s
`
	is := func(text, v string) string { return strings.Replace(text, "%s", v, 1) }
	at := time.Unix(1_800_000_000, 500_000_000)
	for _, step := range []struct {
		name   string
		failed int
		want   string
	}{
		{"no pass yet: no failure and no success", -1, is(failures, "0") + is(failing, "0")},
		{"a pass that failed on two chains counts two", 2, is(failures, "2") + is(failing, "2")},
		{"a pass that failed on none is the last success", 0,
			is(failures, "2") + is(success, "1.8000001205e+09") + is(failing, "0")},
		{"a failed pass after it leaves the last success as it was", 1,
			is(failures, "3") + is(success, "1.8000001205e+09") + is(failing, "1")},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.failed >= 0 {
				r.Pass(at, step.failed)
			}
			at = at.Add(time.Minute)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(step.want),
				"replayguard_audit_retention_failures_total", "replayguard_audit_retention_last_success_timestamp_seconds",
				"replayguard_audit_retention_failing_chains"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The records each audit sink held beyond the count limit at the last
// pass are served by sink; a sink that holds none any longer reads 0.
func TestRetentionServesTheRecordsEachSinkHolds(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r := metrics.NewRetention(reg)
	const held = `
# HELP replayguard_audit_retention_held_records Records beyond audit.retention.max_records that the last audit retention pass kept in the store because the sink had yet to deliver them, summed over the chains the member trims; 0 when it held none.
# TYPE replayguard_audit_retention_held_records gauge
`
	for _, step := range []struct {
		name string
		held map[string]uint64
		want string
	}{
		{"none before a pass", nil, ""},
		{"a sink down holds what it has yet to deliver", map[string]uint64{"collector": 30, "file": 0},
			held + "replayguard_audit_retention_held_records{sink=\"collector\"} 30\nreplayguard_audit_retention_held_records{sink=\"file\"} 0\n"},
		{"once it caught up, 0", map[string]uint64{"collector": 0},
			held + "replayguard_audit_retention_held_records{sink=\"collector\"} 0\nreplayguard_audit_retention_held_records{sink=\"file\"} 0\n"},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.held != nil {
				r.Held(step.held)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(step.want), "replayguard_audit_retention_held_records"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
