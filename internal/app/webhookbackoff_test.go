package app

import (
	"testing"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/forward"
)

// config refuses an outputs.webhook.max_backoff below the drainer's first
// wait: the two are one figure.
func TestTheSmallestWebhookBackoffIsTheDrainersFirstWait(t *testing.T) {
	if got, want := config.MinWebhookBackoff.Std(), forward.DefaultMinBackoff; got != want {
		t.Fatalf("config.MinWebhookBackoff = %v, the drainer's first wait %v", got, want)
	}
}
