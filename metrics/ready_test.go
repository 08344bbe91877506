package metrics_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replayguard/replayguard/metrics"
)

func TestReadyIsReadAtScrapeTime(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg, "v1", "abc")
	if n, err := testutil.GatherAndCount(reg, "replayguard_ready"); err != nil || n != 0 {
		t.Fatalf("replayguard_ready before WatchReady: %d series (%v), want none", n, err)
	}
	var ready atomic.Bool
	m.WatchReady(ready.Load)
	gauge := func(v string) string {
		return `
# HELP replayguard_ready 1 while /readyz answers 200 (the source connected and committing, room in the outbox, no store loss), else 0.
# TYPE replayguard_ready gauge
replayguard_ready ` + v + "\n"
	}
	for _, step := range []struct {
		ready bool
		want  string
	}{{false, "0"}, {true, "1"}, {false, "0"}} {
		ready.Store(step.ready)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(gauge(step.want)), "replayguard_ready"); err != nil {
			t.Fatalf("ready %v: %v", step.ready, err)
		}
	}
}

func TestWatchReadyTwicePanics(t *testing.T) {
	m := metrics.New(prometheus.NewPedanticRegistry(), "v1", "abc")
	m.WatchReady(func() bool { return true })
	defer func() {
		if recover() == nil {
			t.Fatal("a second WatchReady did not panic")
		}
	}()
	m.WatchReady(func() bool { return true })
}
