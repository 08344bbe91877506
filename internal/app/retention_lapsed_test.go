package app

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replayguard/replayguard/metrics"
)

// A member whose chain claims lapsed because the store did not answer
// trims no chain at all: its retention passes fail on its own chain, so
// that the time of the last successful pass stops moving and the failures
// are counted, until a claim succeeds again.
func TestARetentionPassOfAMemberWhoseChainClaimsLapsedIsAFailure(t *testing.T) {
	c := memberChains(t)
	k := &keeperFailing{ChainKeeper: c.g.ChainKeeper}
	c.g.ChainKeeper = k
	if err := c.claim(t.Context()); err != nil || !c.owned("m1") {
		t.Fatalf("claim = %v, owned %v", err, c.owned("m1"))
	}
	k.mu.Lock()
	k.fail = true
	k.mu.Unlock()
	c.mu.Lock()
	c.claimedAt = time.Now().Add(-c.ttl) // the last renewal is a lifetime old
	c.mu.Unlock()
	if err := c.claim(t.Context()); err == nil || c.owned("m1") {
		t.Fatalf("a renewal that fails after the claims' lifetime: %v, owned %v; want the claims given up", err, c.owned("m1"))
	}

	reg := prometheus.NewPedanticRegistry()
	c.retained = metrics.NewRetention(reg)
	passed := func() bool {
		n, _ := gathered(t, reg, retentionFailures)
		_, ok := gathered(t, reg, retentionSuccess)
		return n > 0 || ok
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); c.runRetention(ctx, time.Hour) }() // one pass, at once
	eventually(t, "the first retention pass counted", passed)
	cancel()
	<-done
	if v, ok := gathered(t, reg, retentionSuccess); ok {
		t.Fatalf("%s = %v after a pass that trimmed no chain, the claims lapsed; want it absent", retentionSuccess, v)
	}
	if n, _ := gathered(t, reg, retentionFailures); n != 1 {
		t.Fatalf("%s = %v after one pass with the claims lapsed; want 1", retentionFailures, n)
	}
	if f, _ := gathered(t, reg, "replayguard_audit_retention_failing_chains"); f != 1 {
		t.Fatalf("failing chains = %v; want 1, the member's own", f)
	}
}
