package embedded

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Records of very different sizes, some larger than a chunk, read back from
// every position.
func TestAuditChunksScanFromEveryPosition(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var head engine.Hash
	var recs []engine.AuditRecord
	for i, size := range []int{10, 5000, 3990, 1, 200, 9000, 9000, 0, 4000, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 2} {
		r := engine.AuditRecord{Position: uint64(i + 1), Topic: strings.Repeat("t", size), Outcome: "applied"}
		if err := engine.Seal(&r, head); err != nil {
			t.Fatal(err)
		}
		head = r.Hash
		recs = append(recs, r)
	}
	if got := len(chunkAudit(recs)); got < 8 {
		t.Fatalf("fixture makes %d chunks, want several", got)
	}
	for _, batch := range [][]engine.AuditRecord{recs[:3], recs[3:4], recs[4:]} {
		if err := s.Commit(t.Context(), &engine.Batch{Audit: batch}); err != nil {
			t.Fatal(err)
		}
	}
	for from := range uint64(len(recs) + 2) {
		next := max(from, 1)
		err := s.ScanAudit(t.Context(), from, func(r engine.AuditRecord) error {
			if r.Position != next || r.Topic != recs[next-1].Topic || r.Hash != recs[next-1].Hash {
				t.Fatalf("from %d: got record %d (%d byte topic), want %d", from, r.Position, len(r.Topic), next)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(len(recs)) + 1; next != max(want, from) {
			t.Errorf("from %d: scan stopped before %d, want %d", from, next, want)
		}
	}
}

// A record's length takes one, two or three bytes in front of it (a
// malformed message's record, without key or digest, is under 128 bytes);
// each is written as the format says, whatever room the buffer kept for it.
func TestAuditChunksPrefixEveryRecordWithItsLength(t *testing.T) {
	var head engine.Hash
	var recs []engine.AuditRecord
	var want []byte
	for i, size := range []int{0, 40, 200, 20000, 0, 16300, 3} {
		r := engine.AuditRecord{Position: uint64(i + 1), Topic: strings.Repeat("t", size), Outcome: "malformed"}
		if size > 0 {
			r.Key[0], r.Digest[0] = 1, 2
		}
		if err := engine.Seal(&r, head); err != nil {
			t.Fatal(err)
		}
		head = r.Hash
		recs = append(recs, r)
		rec := appendAudit(nil, &r)
		want = binary.AppendUvarint(want, uint64(len(rec)))
		want = append(want, rec...)
	}
	if n := len(appendAudit(nil, &recs[0])); n >= 128 {
		t.Fatalf("fixture's first record takes %d bytes, want under 128", n)
	}
	var got []byte
	next := uint64(1)
	for _, c := range chunkAudit(recs) {
		if c.first != next {
			t.Fatalf("chunk starts at %d, want %d", c.first, next)
		}
		decoded, err := decodeChunkFrom(nil, binary.BigEndian.AppendUint64(nil, c.first), c.data, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range decoded {
			if r.Topic != recs[next-1].Topic || r.Hash != recs[next-1].Hash {
				t.Fatalf("record %d: %d byte topic, want %d", r.Position, len(r.Topic), len(recs[next-1].Topic))
			}
			next++
		}
		got = append(got, c.data...)
	}
	if next != uint64(len(recs))+1 {
		t.Fatalf("chunks hold %d records, want %d", next-1, len(recs))
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("chunks are %d bytes, not the records each behind its uvarint length (%d bytes)", len(got), len(want))
	}
}

// BenchmarkChunkAudit encodes a batch of 100 records like a Sparkplug
// route's with an effect adding one metric and setting another.
func BenchmarkChunkAudit(b *testing.B) {
	var head engine.Hash
	recs := make([]engine.AuditRecord, 100)
	for i := range recs {
		seq := int64(i)
		recs[i] = engine.AuditRecord{Position: uint64(i + 1), Time: time.Date(2026, 12, 5, 6, 0, 0, i, time.UTC), Ref: uint64(i),
			Route: "plant", Topic: "spBv1.0/plant/NDATA/edge-03", Epoch: "0", Outcome: "applied", Sequence: &seq,
			Source: []string{"plant", "edge-03"}, Key: engine.Hash{1}, Digest: engine.Hash{2},
			Effects: []engine.Change{{Entity: "meter/edge-03", Field: "kwh", Op: "add", Value: []byte("0.25"), After: []byte("7999.25")},
				{Entity: "meter/edge-03", Field: "temperature", Op: "set", Value: []byte("21"), After: []byte("21")}}}
		if err := engine.Seal(&recs[i], head); err != nil {
			b.Fatal(err)
		}
		head = recs[i].Hash
	}
	b.ReportAllocs()
	for b.Loop() {
		chunkAudit(recs)
	}
}
