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
