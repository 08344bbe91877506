package config

import (
	"slices"
	"testing"
)

// The drainer's wait after a failed delivery doubles from 100ms and is
// capped by outputs.webhook.max_backoff: a cap below 100ms (1ns) made it
// retry a receiver that is down back to back. Such a cap is refused.
func TestAWebhookBackoffCapBelowTheFirstWaitIsRefused(t *testing.T) {
	got := problemsOf(t, "outputs: {webhook: {max_backoff: 1ns}}\n")
	want := []string{"outputs.webhook.max_backoff: max_backoff 1ns is below 100ms, the first wait after a failed delivery: a receiver that is down would be retried back to back"}
	if !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q", got, want)
	}
	if got := problemsOf(t, "outputs: {webhook: {max_backoff: 100ms}}\n"); got != nil {
		t.Fatalf("max_backoff 100ms: problems %q, want none", got)
	}
}
