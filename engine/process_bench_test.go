package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// discardStore commits nothing: BenchmarkProcess measures the engine alone.
type discardStore struct{}

func (discardStore) Load(context.Context) (*engine.Snapshot, error) { return &engine.Snapshot{}, nil }
func (discardStore) Commit(context.Context, *engine.Batch) error    { return nil }
func (discardStore) Close() error                                   { return nil }
func (discardStore) Capabilities() engine.Capabilities              { return engine.Capabilities{} }
func (discardStore) ScanAudit(context.Context, uint64, func(engine.AuditRecord) error) error {
	return nil
}
func (discardStore) ScanQuarantine(context.Context, func(engine.QuarantineEntry) error) error {
	return nil
}
func (discardStore) Quarantined(context.Context, uint64) (engine.QuarantineEntry, error) {
	return engine.QuarantineEntry{}, engine.ErrNotFound
}

// BenchmarkProcess measures the whole hot path but the store: batches of
// 1000 incident updates of ~200 bytes decoded, decided, projected, audited
// (hash chain) and sealed, on a store that keeps nothing.
func BenchmarkProcess(b *testing.B) {
	ctx := context.Background()
	e, err := engine.New(ctx, discardStore{}, engine.Options{Routes: []engine.Route{{
		Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"},
		Sequence: "sequence", Epoch: "boot_id",
		Effects: []engine.EffectSpec{{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"}},
			{Entity: "unit/{unit_id}", Set: map[string]string{"status": "unit_status"}}}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	const batch, sources = 1000, 50
	msgs := make([]engine.Message, batch)
	seq := make([]int, sources)
	var cpu time.Duration
	var mallocs uint64
	var ms runtime.MemStats
	n := 0
	for b.Loop() {
		b.StopTimer() // the feed is made outside the measure
		for i := range msgs {
			s := n % sources
			n++
			seq[s]++
			msgs[i] = engine.Message{Topic: "incidents/fire", Payload: fmt.Appendf(nil,
				`{"agency":"county-fire","source_id":"mdt-%03d","boot_id":1,"sequence":%d,`+
					`"incident_id":"INC-2026-%04d","unit_id":"E%d","unit_status":"enroute","casualty_delta":0,`+
					`"lat":38.8977,"lon":-77.0365,"note":"structure fire, 2nd alarm"}`, s, seq[s], seq[s]%97, s)}
		}
		runtime.ReadMemStats(&ms)
		m0, c0 := ms.Mallocs, processCPU()
		b.StartTimer()
		if _, err := e.Process(ctx, msgs); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += processCPU() - c0
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - m0
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/msg")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/msg")
	b.ReportMetric(float64(mallocs)/float64(n), "allocs/msg")
}

// processCPU is the process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
