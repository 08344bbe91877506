package audit_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

var meters = []engine.Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}}

// feed is a memory store with an engine on it.
type feed struct {
	st   *memory.Store
	e    *engine.Engine
	next int
	now  time.Time
}

func newFeed(t *testing.T) *feed {
	t.Helper()
	f := &feed{st: memory.New(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e, err := engine.New(t.Context(), f.st, engine.Options{Routes: meters, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	f.e = e
	return f
}

// decide feeds n fresh messages, 1000 to a batch.
func (f *feed) decide(t *testing.T, n int) {
	t.Helper()
	for n > 0 {
		msgs := make([]engine.Message, min(n, 1000))
		for i := range msgs {
			msgs[i] = engine.Message{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d","kwh":0.25}`, f.next)}
			f.next++
		}
		if _, err := f.e.Process(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
		n -= len(msgs)
	}
}

// conflict feeds a changed copy of message i: it is held in quarantine.
func (f *feed) conflict(t *testing.T, i int) uint64 {
	t.Helper()
	d, err := f.e.Process(t.Context(), []engine.Message{{Topic: "plant/m1/energy", Payload: fmt.Appendf(nil, `{"msgId":"m-%d","kwh":9}`, i)}})
	if err != nil || d[0].Outcome != engine.Conflict {
		t.Fatalf("a changed copy: %v, %v", d, err)
	}
	return d[0].Position
}

func (f *feed) head(context.Context) (uint64, error) { return f.e.Stats().Position, nil }

func (f *feed) retention(t *testing.T, dir string, opts audit.RetentionOptions) *audit.Retention {
	t.Helper()
	opts.Archive, opts.Head, opts.Now = dir, f.head, func() time.Time { return f.now }
	r, err := audit.NewRetention(f.st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *feed) verify(t *testing.T, dir string) (audit.Verified, error) {
	t.Helper()
	snap, err := f.st.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return audit.VerifyWithArchive(t.Context(), dir, f.st, snap.AuditHead)
}

// archived feeds 10000 decisions and keeps 1000 in the store, in segments
// of 2500: positions 1..2500, ..., 7501..9000 in the archive.
func archived(t *testing.T) (*feed, string) {
	t.Helper()
	f, dir := newFeed(t), t.TempDir()
	f.decide(t, 10_000)
	res, err := f.retention(t, dir, audit.RetentionOptions{MaxRecords: 1000, SegmentRecords: 2500}).Once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != 4 || res.Records != 9000 || res.Base.Position != 9000 {
		t.Fatalf("Once = %+v; want 4 segments, 9000 records, base 9000", res)
	}
	return f, dir
}

func brokenAt(t *testing.T, err error, pos uint64, words ...string) {
	t.Helper()
	t.Log(err)
	var b *audit.BrokenError
	if !errors.As(err, &b) {
		t.Fatalf("err = %v, want a BrokenError at position %d", err, pos)
	}
	if b.Position != pos {
		t.Errorf("broken at position %d, want %d: %v", b.Position, pos, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
}

func TestRetentionArchivesAndTheChainStaysVerifiable(t *testing.T) {
	f, dir := archived(t)
	v, err := f.verify(t, dir)
	if err != nil {
		t.Fatalf("VerifyWithArchive: %v", err)
	}
	if v.Archive.Segments != 4 || v.Archive.Records != 9000 || v.Base.Position != 9000 || v.Stored != 1000 {
		t.Fatalf("verified %+v; want 4 segments of 9000 records, then 1000 stored from base 9000", v)
	}
	snap, _ := f.st.Load(t.Context())
	if n, err := audit.Verify(t.Context(), f.st, snap.AuditHead); err != nil || n != 1000 {
		t.Fatalf("Verify of the trimmed store alone = %d, %v; want 1000 from its base", n, err)
	}

	t.Run("a segment holds the records exactly as audit export writes them", func(t *testing.T) {
		var want bytes.Buffer
		m := manifest(t, dir, 2501)
		got := gunzip(t, filepath.Join(dir, m.Segment))
		lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
		if len(lines) != 2500 || m.Records != 2500 || m.First != 2501 || m.Last != 5000 {
			t.Fatalf("segment %s holds %d lines, manifest %+v", m.Segment, len(lines), m)
		}
		var first engine.AuditRecord
		if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
			t.Fatal(err)
		}
		line, _ := engine.AppendRecordJSON(nil, &first)
		want.Write(line)
		if lines[0] != want.String() || first.Prev != m.Prev {
			t.Fatalf("line 1 is not what export writes, or does not link to the manifest's prev:\n%s\n%s", lines[0], want.String())
		}
	})

	t.Run("the feed goes on and the next pass continues the archive", func(t *testing.T) {
		f.decide(t, 3000)
		res, err := f.retention(t, dir, audit.RetentionOptions{MaxRecords: 1000, SegmentRecords: 2500}).Once(t.Context())
		if err != nil || res.Records != 3000 || res.Base.Position != 12_000 {
			t.Fatalf("second pass = %+v, %v; want 3000 more archived, base 12000", res, err)
		}
		if v, err := f.verify(t, dir); err != nil || v.Archive.Records != 12_000 || v.Stored != 1000 {
			t.Fatalf("VerifyWithArchive after the second pass = %+v, %v", v, err)
		}
	})
}

func TestVerifyWithArchiveCatchesTampering(t *testing.T) {
	t.Run("a byte changed in a segment fails its SHA-256", func(t *testing.T) {
		f, dir := archived(t)
		m := manifest(t, dir, 2501)
		path := filepath.Join(dir, m.Segment)
		b, _ := os.ReadFile(path)
		b[len(b)/2] ^= 0x20
		os.WriteFile(path, b, 0o600)
		_, err := f.verify(t, dir)
		brokenAt(t, err, 2501, m.Segment, "SHA-256")
	})

	t.Run("a record altered and the manifest's SHA-256 redone fails the record's hash", func(t *testing.T) {
		f, dir := archived(t)
		m := manifest(t, dir, 5001)
		path := filepath.Join(dir, m.Segment)
		text := string(gunzip(t, path))
		lines := strings.Split(text, "\n")
		lines[41] = strings.Replace(lines[41], `"outcome":"applied"`, `"outcome":"duplicate"`, 1) // position 5042
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write([]byte(strings.Join(lines, "\n")))
		zw.Close()
		os.WriteFile(path, buf.Bytes(), 0o600)
		sum := sha256.Sum256(buf.Bytes())
		m.SHA256 = hex.EncodeToString(sum[:])
		writeManifest(t, dir, m)
		_, err := f.verify(t, dir)
		brokenAt(t, err, 5042, m.Segment, "altered")
	})

	t.Run("a deleted segment is named by its positions", func(t *testing.T) {
		f, dir := archived(t)
		removeSegment(t, dir, 2501)
		_, err := f.verify(t, dir)
		brokenAt(t, err, 2501, "positions 2501..5000", "missing")
	})

	t.Run("a deleted first segment is named by its positions", func(t *testing.T) {
		f, dir := archived(t)
		removeSegment(t, dir, 1)
		_, err := f.verify(t, dir)
		brokenAt(t, err, 1, "positions 1..2500", "missing")
	})

	t.Run("a deleted last segment leaves a hole before the store's base", func(t *testing.T) {
		f, dir := archived(t)
		removeSegment(t, dir, 7501)
		_, err := f.verify(t, dir)
		brokenAt(t, err, 7501, "positions 7501..9000", "missing")
	})

	t.Run("a segment file gone under its manifest is named", func(t *testing.T) {
		f, dir := archived(t)
		m := manifest(t, dir, 5001)
		os.Remove(filepath.Join(dir, m.Segment))
		_, err := f.verify(t, dir)
		brokenAt(t, err, 5001, m.Segment, "missing")
	})

	t.Run("two segments swapped under each other's names are caught", func(t *testing.T) {
		f, dir := archived(t)
		a, b := manifest(t, dir, 2501), manifest(t, dir, 5001)
		swap(t, dir, audit.ManifestName(a.First, a.Last), audit.ManifestName(b.First, b.Last))
		swap(t, dir, a.Segment, b.Segment)
		_, err := f.verify(t, dir)
		brokenAt(t, err, 2501, "renamed or reordered")
	})

	t.Run("two segments' records swapped, manifests redone, break the chain", func(t *testing.T) {
		f, dir := archived(t)
		a, b := manifest(t, dir, 2501), manifest(t, dir, 5001)
		swap(t, dir, a.Segment, b.Segment)
		a.SHA256, b.SHA256 = b.SHA256, a.SHA256
		writeManifest(t, dir, a)
		writeManifest(t, dir, b)
		_, err := f.verify(t, dir)
		brokenAt(t, err, 2501, "found position 5001 where 2501 should be")
	})

	t.Run("a manifest whose segment size was edited is caught", func(t *testing.T) {
		f, dir := archived(t)
		m := manifest(t, dir, 5001)
		m.Bytes += 100_000 // the segment and every other word of its manifest as sealed
		writeManifest(t, dir, m)
		_, err := f.verify(t, dir)
		brokenAt(t, err, 5001, m.Segment, "bytes, its manifest says")
	})

	t.Run("a manifest that does not seal its segment's last record is caught", func(t *testing.T) {
		f, dir := archived(t)
		m := manifest(t, dir, 7501)
		m.Hash[0] ^= 1 // the manifest no longer seals its last record
		writeManifest(t, dir, m)
		_, err := f.verify(t, dir)
		brokenAt(t, err, 9000, m.Segment, "its manifest says")
	})
}

func TestRetentionKeepsHeldRecords(t *testing.T) {
	f, dir := newFeed(t), t.TempDir()
	f.decide(t, 3000)
	held := f.conflict(t, 7) // position 3001
	f.decide(t, 3000)
	r := f.retention(t, dir, audit.RetentionOptions{MaxRecords: 100, SegmentRecords: 1000})
	res, err := r.Once(t.Context())
	if err != nil || res.Base.Position != held-1 {
		t.Fatalf("Once with entry %d held = %+v, %v; want the store to keep it and after", held, res, err)
	}
	if _, err := f.e.Discard(t.Context(), held, "a meter's test reading", "op"); err != nil {
		t.Fatal(err)
	}
	res, err = r.Once(t.Context())
	if err != nil || res.Base.Position != f.e.Stats().Position-100 {
		t.Fatalf("Once after the entry is resolved = %+v, %v; want 100 records kept", res, err)
	}
	if _, err := f.verify(t, dir); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionByAge(t *testing.T) {
	f, dir := newFeed(t), t.TempDir()
	for range 5 {
		f.decide(t, 1000)
		f.now = f.now.Add(time.Hour)
	}
	// Records 1..1000 are 5h old, ..., 4001..5000 1h old.
	res, err := f.retention(t, dir, audit.RetentionOptions{MaxAge: 150 * time.Minute}).Once(t.Context())
	if err != nil || res.Base.Position != 3000 {
		t.Fatalf("Once with max age 2h30m = %+v, %v; want records older than that (1..3000) archived", res, err)
	}
	if _, err := f.verify(t, dir); err != nil {
		t.Fatal(err)
	}
}

// failingTrim is a store whose trims fail, as when the process stops
// between sealing a segment and dropping its records.
type failingTrim struct{ *memory.Store }

func (failingTrim) TrimAudit(context.Context, uint64, engine.AuditHead) error {
	return errors.New("stopped")
}

func TestRetentionAfterAnInterruptedTrim(t *testing.T) {
	f, dir := newFeed(t), t.TempDir()
	f.decide(t, 5000)
	opts := audit.RetentionOptions{Archive: dir, MaxRecords: 1000, SegmentRecords: 3000, Head: f.head}
	r, _ := audit.NewRetention(failingTrim{f.st}, opts)
	if _, err := r.Once(t.Context()); err == nil {
		t.Fatal("Once with a failing trim returned nil")
	}
	if v, err := f.verify(t, dir); err != nil || v.Archive.Records != 3000 || v.Stored != 5000 {
		t.Fatalf("archive overlapping the untrimmed store: %+v, %v; want it to verify", v, err)
	}
	f.decide(t, 500)
	opts.SegmentRecords = 2000 // other segment bounds than the sealed one
	r, _ = audit.NewRetention(f.st, opts)
	if res, err := r.Once(t.Context()); err != nil || res.Base.Position != 4500 {
		t.Fatalf("Once after the interruption = %+v, %v", res, err)
	}
	v, err := f.verify(t, dir)
	if err != nil || v.Archive.Segments != 3 || v.Archive.Records != 4500 {
		t.Fatalf("VerifyWithArchive = %+v, %v; want the stale segment replaced by 3 of 2000, 2000, 500", v, err)
	}
}

func TestNewRetentionRefusesNoArchive(t *testing.T) {
	_, err := audit.NewRetention(memory.New(), audit.RetentionOptions{MaxRecords: 10, Head: func(context.Context) (uint64, error) { return 0, nil }})
	if !errors.Is(err, audit.ErrRetention) {
		t.Fatalf("NewRetention without an archive = %v, want ErrRetention", err)
	}
}

func manifest(t *testing.T, dir string, first uint64) audit.Manifest {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("audit-%020d-*.manifest.json", first)))
	if len(matches) != 1 {
		t.Fatalf("manifests of a segment from %d: %v", first, matches)
	}
	var m audit.Manifest
	b, err := os.ReadFile(matches[0])
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func writeManifest(t *testing.T, dir string, m audit.Manifest) {
	t.Helper()
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, audit.ManifestName(m.First, m.Last)), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func removeSegment(t *testing.T, dir string, first uint64) {
	t.Helper()
	m := manifest(t, dir, first)
	for _, name := range []string{m.Segment, audit.ManifestName(m.First, m.Last)} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func swap(t *testing.T, dir, a, b string) {
	t.Helper()
	pa, pb, tmp := filepath.Join(dir, a), filepath.Join(dir, b), filepath.Join(dir, "swap")
	for _, mv := range [][2]string{{pa, tmp}, {pb, pa}, {tmp, pb}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAPassWithNothingToArchiveWritesNothing: a store within its bounds
// lets nothing go, and the pass that finds so (one every interval while
// the daemon runs) touches nothing in the archive, not even for a moment:
// an operator may copy or move the directory meanwhile.
func TestAPassWithNothingToArchiveWritesNothing(t *testing.T) {
	f, parent := newFeed(t), t.TempDir()
	dir := filepath.Join(parent, "archive")
	f.decide(t, 1500)
	r := f.retention(t, dir, audit.RetentionOptions{MaxRecords: 1000, SegmentRecords: 1000})
	if res, err := r.Once(t.Context()); err != nil || res.Base.Position != 500 {
		t.Fatalf("first pass = %+v, %v; want 500 archived", res, err)
	}
	if err := os.Rename(dir, filepath.Join(parent, "copied away")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if res, err := r.Once(t.Context()); err != nil || res.Segments != 0 || res.Base.Position != 500 {
			t.Fatalf("a pass with nothing to archive = %+v, %v", res, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the passes with nothing to archive made the archive again: %v", err)
	}
}
