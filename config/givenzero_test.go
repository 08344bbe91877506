package config

import (
	"strings"
	"testing"
)

// A zero written for a setting whose zero means "the default" is refused,
// as window.ttl: 0s is: the default would silently replace what the file
// says (an outbox of 0 entries holding 100000, a commit timeout of 0s
// waiting 30s).
func TestGivenZerosOfOtherSettingsAreRefused(t *testing.T) {
	shared := "store: {kind: postgres, url: 'postgres://h/db', member: m, "
	for _, tc := range []struct{ file, key string }{
		{"outbox: {max_entries: 0}\n", "outbox.max_entries"},
		{shared + "commit_timeout: 0s}\n", "store.commit_timeout"},
		{shared + "journal: {retention: 0s}}\n", "store.journal.retention"},
		{"outputs: {webhook: {timeout: 0s}}\n", "outputs.webhook.timeout"},
		{"outputs: {webhook: {max_backoff: 0s}}\n", "outputs.webhook.max_backoff"},
		{"store: {kind: embedded, cached_rows: 0}\n", "store.cached_rows"},
		{"store: {cached_rows: 0}\n", "store.cached_rows"}, // the kind embedded by default
	} {
		got := problemsOf(t, tc.file)
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.key+": ") || !strings.Contains(got[0], "is 0") {
			t.Errorf("%q: problems %q, want one about %s being 0", tc.file, got, tc.key)
		}
	}
}

// The audit sinks', retention's and the MQTT output's settings whose zero
// means their default are refused when written as 0 too: keep: 0 on a
// file sink that rotates would keep five rotated files, a sink timeout of
// 0s wait 10s, retention every 0s run every minute.
func TestGivenZerosOfAuditAndOutputSettingsAreRefused(t *testing.T) {
	archive := "audit: {archive: /a, retention: {max_records: 10, interval: 0s}}\n"
	for _, tc := range []struct{ file, key, def string }{
		{archive, "audit.retention.interval", "(1m)"},
		{"audit: {sinks: [{name: o, kind: otlp, endpoint: 'http://c:4318/v1/logs', timeout: 0s}]}\n", "audit.sinks[0].timeout", "(10s)"},
		{"audit: {sinks: [{name: s, kind: syslog, address: 'h:514', max_message: 0}]}\n", "audit.sinks[0].max_message", "(8KiB)"},
		{"audit: {sinks: [{name: f, kind: file, path: /x}, {name: g, kind: file, path: /y, max_bytes: 1MiB, keep: 0}]}\n", "audit.sinks[1].keep", "(5)"},
		{"outputs: {mqtt: {brokers: ['tcp://h:1883'], keep_alive: 0s}}\n", "outputs.mqtt.keep_alive", "(mqtt.keep_alive's, 30s)"},
	} {
		got := problemsOf(t, tc.file)
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.key+": ") || !strings.Contains(got[0], "is 0: remove it to use the default "+tc.def) {
			t.Errorf("%q: problems %q, want one about %s being 0", tc.file, got, tc.key)
		}
	}
	// keep: 0 where nothing rotates takes no default: nothing to refuse.
	if got := problemsOf(t, "audit: {sinks: [{name: f, kind: file, path: /x, keep: 0}]}\n"); got != nil {
		t.Errorf("keep: 0 without max_bytes: problems %q, want none", got)
	}
}
