package config

import (
	"slices"
	"testing"
)

// A webhook's or an otlp sink's timeout of 1ns, which lint took, times out
// every request before its receiver can answer: the webhook's entries
// stay in the outbox until it is full and stops the feed, the sink
// delivers nothing. A timeout below 100ms is refused.
func TestARequestTimeoutNoReceiverCanMeetIsRefused(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"outputs: {webhook: {timeout: 1ns}}\n",
			"outputs.webhook.timeout: timeout 1ns is below 100ms: a POST would time out before its receiver could answer, and the outbox fill up undelivered"},
		{"audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://c:4318/v1/logs', timeout: 1ms}]}\n",
			"audit.sinks[0].timeout: timeout 1ms is below 100ms: an export would time out before its receiver could answer, and the sink deliver nothing"},
	} {
		if got := problemsOf(t, tc.file); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("%q: problems %q, want %q", tc.file, got, tc.want)
		}
	}
	for _, file := range []string{"outputs: {webhook: {timeout: 100ms}}\n",
		"audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://c:4318/v1/logs', timeout: 100ms}]}\n"} {
		if got := problemsOf(t, file); got != nil {
			t.Errorf("%q: problems %q, want none", file, got)
		}
	}
}
