package consume

import (
	"bytes"
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// A consumer in a share group whose filters are all Unshared (Sparkplug
// routes alone) holds none of the group's share: its stop asks the store
// nothing and warns of no share group subscription kept, which it never
// had; it said "keeping the share group's subscription, no other live
// member of the group holds it".
func TestAStopWithNoSharedFilterLeavesNothing(t *testing.T) {
	var logs bytes.Buffer
	var asked atomic.Int32
	l := &Leaving{Group: "g", Timeout: time.Second, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Ask:     func(context.Context) (bool, error) { asked.Add(1); return false, nil },
		Filters: []Filter{{Topic: "spBv1.0/plant/#", QoS: 1, Unshared: true}}}
	parent, cancel := context.WithCancel(context.Background())
	_, stop := l.Context(parent)
	cancel()
	stop()
	if asked.Load() != 0 || logs.Len() != 0 {
		t.Fatalf("asked the store %d times; logged %q", asked.Load(), logs.String())
	}
}
