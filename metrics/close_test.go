package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/metrics"
)

// pausedStore is an engine on a shared store whose server was paused: a
// count of its windows blocks until its context ends, and says how.
type pausedStore struct{ ended chan error }

func (pausedStore) Stats() engine.Stats { return engine.Stats{Shared: true} }

func (s pausedStore) CountGaps(ctx context.Context) (int, int64, error) {
	<-ctx.Done()
	s.ended <- ctx.Err()
	return 0, 0, ctx.Err()
}

// TestClosingTheMetricsStopsTheWindowsCountAScrapeLeftRunning: a scrape
// of a member whose store does not answer leaves the count of the windows
// running when it gives up; Close cancels that count and waits for it, so
// that nothing of the metrics outlives run's shutdown and reads the store
// as it closes.
func TestClosingTheMetricsStopsTheWindowsCountAScrapeLeftRunning(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "v1", "abc")
	s := pausedStore{ended: make(chan error, 1)}
	m.Watch(s)
	reg.Gather() // gives up on the windows after 0.5 s; their count goes on

	began := time.Now()
	m.Close()
	if took := time.Since(began); took > time.Second {
		t.Errorf("Close took %v: it waited the count out instead of stopping it", took)
	}
	select {
	case err := <-s.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the count ended with %v, want it cancelled by Close", err)
		}
	default:
		t.Fatal("Close returned with the count of the windows still running")
	}
	goleak.VerifyNone(t, ignore)

	fams, err := reg.Gather() // a scrape after Close starts no count
	if err == nil {
		t.Errorf("a scrape after Close gathered %d families without error, want the windows unread", len(fams))
	}
	select {
	case err := <-s.ended:
		t.Fatalf("a scrape after Close counted the windows again (ended %v)", err)
	default:
	}
	goleak.VerifyNone(t, ignore)
}
