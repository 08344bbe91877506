package storetest

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Workload generates group commits shaped like the engine's: per decision
// one audit record and one key entry, per batch a handful of source and
// entity upserts, and once the key window is full an EvictBelow that keeps
// it at Window entries. Records carry well-formed but unsealed hashes: stores
// do not verify the chain, and sealing would dominate the measurement.
type Workload struct {
	BatchSize int // decisions per batch
	Window    int // key entries kept
	Sources   int // source windows upserted per batch, out of 500
	Entities  int // entities upserted per batch, out of 3000

	next uint64 // last position and ordinal written
	seq  int64
}

// NewWorkload returns the workload the store benchmarks use: batches of
// 1000 decisions, a window of window entries, 8 sources and 16 entities
// per batch.
func NewWorkload(window int) *Workload {
	return &Workload{BatchSize: 1000, Window: window, Sources: 8, Entities: 16}
}

// Written reports how many decisions the workload has produced.
func (w *Workload) Written() uint64 { return w.next }

// Next returns the next batch.
func (w *Workload) Next() *engine.Batch {
	b := &engine.Batch{
		Keys:  make([]engine.KeyEntry, 0, w.BatchSize),
		Audit: make([]engine.AuditRecord, 0, w.BatchSize),
	}
	now := time.Now()
	for range w.BatchSize {
		w.next++
		w.seq++
		b.Keys = append(b.Keys, engine.KeyEntry{Ordinal: w.next, Key: keyHash(w.next), Digest: keyHash(^w.next), Time: now.UnixNano()})
		b.Audit = append(b.Audit, w.record(now))
	}
	b.NextKey = w.next + 1
	if w.next > uint64(w.Window) {
		b.EvictBelow = w.next - uint64(w.Window) + 1
	}
	for i := range w.Sources {
		n := (int(w.next) + i*7) % 500
		src := sourceState("incidents", []string{fmt.Sprintf("agency-%d", n%9), fmt.Sprintf("dev-%06d", n)}, w.seq)
		src.Epochs[0].Bitmap = make([]uint64, 64) // sequence_span 4096
		src.Epochs[0].Bitmap[0] = uint64(w.seq)
		b.Sources = append(b.Sources, src)
	}
	for i := range w.Entities {
		b.Entities = append(b.Entities, entityState(fmt.Sprintf("incident/%d", (int(w.next)+i*13)%3000), w.seq))
	}
	return b
}

func (w *Workload) record(now time.Time) engine.AuditRecord {
	seq := w.seq
	var h [32]byte
	binary.BigEndian.PutUint64(h[:], w.next)
	prev := h
	binary.BigEndian.PutUint64(prev[:], w.next-1)
	return engine.AuditRecord{
		Position: w.next,
		Time:     now,
		Route:    "incidents",
		Topic:    "incidents/agency-7/unit-12",
		Source:   []string{"agency-7", fmt.Sprintf("dev-%06d", w.next%500)},
		Epoch:    "1700000000",
		Sequence: &seq,
		Key:      keyHash(w.next),
		Digest:   keyHash(^w.next),
		Outcome:  "applied",
		Broker:   "tcp://127.0.0.1:1883",
		Prev:     prev,
		Hash:     h,
	}
}

// Fill commits batches until the key window is full.
func (w *Workload) Fill(tb testing.TB, s engine.Store) {
	tb.Helper()
	for w.next < uint64(w.Window) {
		if err := s.Commit(tb.Context(), w.Next()); err != nil {
			tb.Fatalf("fill: %v", err)
		}
	}
}

// BenchCommit measures Commit with the workload's batches and reports
// decisions/s. Building the batches is not timed.
func BenchCommit(b *testing.B, s engine.Store, w *Workload) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		batch := w.Next()
		b.StartTimer()
		if err := s.Commit(b.Context(), batch); err != nil {
			b.Fatalf("Commit: %v", err)
		}
	}
	b.ReportMetric(float64(b.N*w.BatchSize)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchLoad measures Load and reports the key entries loaded per second.
func BenchLoad(b *testing.B, s engine.Store) {
	b.Helper()
	var keys int
	for b.Loop() {
		snap, err := s.Load(b.Context())
		if err != nil {
			b.Fatalf("Load: %v", err)
		}
		keys = len(snap.Keys)
	}
	b.ReportMetric(float64(keys), "keys")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1000, "ms/load")
}
