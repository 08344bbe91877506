package audit

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// An archive is a directory of sealed segments, each a run of consecutive
// records of one chain that audit retention moved out of the store:
//
//	audit-<first>-<last>.jsonl.gz       the records as Export writes them, gzip
//	audit-<first>-<last>.manifest.json  its Manifest, written after it
//
// with first and last the positions, 20 digits, so that names sort in
// chain order. A shared store's member keeps its chain's segments in the
// subdirectory member-<id>. A manifest seals its segment: a segment file
// without one was being written when the process stopped; its records are
// still in the store and the next run writes it again.
const (
	segmentPrefix  = "audit-"
	segmentSuffix  = ".jsonl.gz"
	manifestSuffix = ".manifest.json"
	manifestFormat = 1
)

// Manifest describes one sealed segment.
type Manifest struct {
	Format  int         `json:"format"`           // 1
	Member  string      `json:"member,omitempty"` // the chain's member; empty for a single-owner store
	First   uint64      `json:"first"`            // position of the first record
	Last    uint64      `json:"last"`             // position of the last record
	Prev    engine.Hash `json:"prev"`             // the chain hash before the first record (its prev)
	Hash    engine.Hash `json:"hash"`             // the chain hash of the last record
	Records uint64      `json:"records"`
	Segment string      `json:"segment"` // the segment's file name
	SHA256  string      `json:"sha256"`  // of the segment file, lowercase hex
	Bytes   int64       `json:"bytes"`   // the segment file's size
	Created time.Time   `json:"created"`
}

// SegmentName is the file name of the segment holding positions first..last.
func SegmentName(first, last uint64) string {
	return fmt.Sprintf("%s%020d-%020d%s", segmentPrefix, first, last, segmentSuffix)
}

// ManifestName is the file name of the manifest of segment first..last.
func ManifestName(first, last uint64) string {
	return fmt.Sprintf("%s%020d-%020d%s", segmentPrefix, first, last, manifestSuffix)
}

// ChainDir is the directory of archive dir that holds member's segments
// (dir itself for a single-owner store's chain).
func ChainDir(dir, member string) string {
	if member == "" {
		return dir
	}
	return filepath.Join(dir, "member-"+member)
}

// segmentWriter writes one segment to a temporary file; seal makes it and
// its manifest durable under their names.
type segmentWriter struct {
	dir  string
	f    *os.File
	sum  hash.Hash
	size int64
	gz   *gzip.Writer
	line []byte
	m    Manifest
}

// countingWriter counts and hashes what reaches the file.
type countingWriter struct{ w *segmentWriter }

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.f.Write(p)
	c.w.sum.Write(p[:n])
	c.w.size += int64(n)
	return n, err
}

// newSegment starts a segment of member's chain after prev.
func newSegment(dir, member string, prev engine.AuditHead) (*segmentWriter, error) {
	if err := mkdirDurably(dir); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".tmp-segment-*")
	if err != nil {
		return nil, fmt.Errorf("audit archive: %w", err)
	}
	w := &segmentWriter{dir: dir, f: f, sum: sha256.New(),
		m: Manifest{Format: manifestFormat, Member: member, First: prev.Position + 1, Last: prev.Position, Prev: prev.Hash, Hash: prev.Hash}}
	// No name or time in the gzip header: the same records give the same bytes.
	w.gz, _ = gzip.NewWriterLevel(countingWriter{w}, gzip.BestSpeed)
	return w, nil
}

// add appends the next record of the chain.
func (w *segmentWriter) add(r *engine.AuditRecord) error {
	var err error
	if w.line, err = engine.AppendRecordJSON(w.line[:0], r); err != nil {
		return err
	}
	if _, err = w.gz.Write(append(w.line, '\n')); err != nil {
		return fmt.Errorf("audit archive: %w", err)
	}
	w.m.Last, w.m.Hash = r.Position, r.Hash
	w.m.Records++
	return nil
}

// seal writes the segment and then its manifest durably: each to a
// temporary file, synced, renamed to its name, and the directory synced.
// When seal returns nil both survive a crash.
func (w *segmentWriter) seal(now time.Time) (Manifest, error) {
	if err := w.gz.Close(); err != nil {
		w.abort()
		return w.m, fmt.Errorf("audit archive: %w", err)
	}
	w.m.Segment = SegmentName(w.m.First, w.m.Last)
	w.m.SHA256 = hex.EncodeToString(w.sum.Sum(nil))
	w.m.Bytes = w.size
	w.m.Created = now.UTC()
	if err := syncClose(w.f); err != nil {
		os.Remove(w.f.Name())
		return w.m, err
	}
	if err := os.Rename(w.f.Name(), filepath.Join(w.dir, w.m.Segment)); err != nil {
		os.Remove(w.f.Name())
		return w.m, fmt.Errorf("audit archive: %w", err)
	}
	if err := syncDir(w.dir); err != nil { // the segment's name before its manifest's
		return w.m, err
	}
	body, err := json.MarshalIndent(w.m, "", "  ")
	if err != nil {
		return w.m, err
	}
	if err := writeDurably(w.dir, ManifestName(w.m.First, w.m.Last), append(body, '\n')); err != nil {
		return w.m, err
	}
	return w.m, syncDir(w.dir)
}

// abort drops the unsealed segment.
func (w *segmentWriter) abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

func syncClose(f *os.File) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit archive: %w", err)
	}
	return nil
}

// writeDurably writes name in dir through a synced temporary file.
func writeDurably(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, ".tmp-manifest-*")
	if err != nil {
		return fmt.Errorf("audit archive: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("audit archive: %w", err)
	}
	if err := syncClose(f); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("audit archive: %w", err)
	}
	return nil
}

// mkdirDurably makes dir and the directories above it that are missing,
// and syncs the directory that holds each one it made, so that a crash
// after a segment is sealed in it does not lose the directory.
func mkdirDurably(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirDurably(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("audit archive: %w", err)
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit archive: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit archive: sync %s: %w", dir, err)
	}
	return nil
}

// clearFrom removes what an interrupted run left in dir: temporary files,
// and every segment from position first on, whose records the store still
// holds (the store was not trimmed after they were sealed). The manifest
// goes first, so that a crash in between leaves only unsealed files.
func clearFrom(dir string, first uint64) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit archive: %w", err)
	}
	var stale []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			stale = append(stale, name)
			continue
		}
		f, l, kind, ok := parseName(name)
		if ok && f >= first {
			if kind == manifestSuffix {
				stale = append([]string{name, SegmentName(f, l)}, stale...)
			} else {
				stale = append(stale, name)
			}
		}
	}
	for _, name := range stale {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit archive: %w", err)
		}
	}
	return nil
}

// parseName reads first, last and the suffix (segmentSuffix or
// manifestSuffix) from an archive file name.
func parseName(name string) (first, last uint64, suffix string, ok bool) {
	for _, sfx := range []string{segmentSuffix, manifestSuffix} {
		if !strings.HasPrefix(name, segmentPrefix) || !strings.HasSuffix(name, sfx) {
			continue
		}
		mid := strings.TrimSuffix(strings.TrimPrefix(name, segmentPrefix), sfx)
		if _, err := fmt.Sscanf(mid, "%020d-%020d", &first, &last); err != nil || len(mid) != 41 {
			return 0, 0, "", false
		}
		return first, last, sfx, true
	}
	return 0, 0, "", false
}

// readSegment calls fn for each record of the segment file path, checking
// its SHA-256 against m first.
func readSegment(path string, m Manifest, fn func(engine.AuditRecord) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sum := sha256.New()
	size, err := io.Copy(sum, f)
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != m.SHA256 {
		return &BrokenError{Position: m.First, Member: m.Member,
			Reason: fmt.Sprintf("segment %s has SHA-256 %s, its manifest says %s: the file was altered or replaced", m.Segment, got, m.SHA256)}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		return &BrokenError{Position: m.First, Member: m.Member, Reason: fmt.Sprintf("segment %s: %v", m.Segment, err)}
	}
	n, err := scanJSONL(gz, fn)
	if err != nil {
		var b *BrokenError
		if !errors.As(err, &b) {
			err = &BrokenError{Position: m.First + n, Member: m.Member, Reason: fmt.Sprintf("segment %s: %v", m.Segment, err)}
		}
		return err
	}
	if size != m.Bytes { // its records whole: the manifest was edited
		return &BrokenError{Position: m.First, Member: m.Member,
			Reason: fmt.Sprintf("segment %s is %d bytes, its manifest says %d: the manifest was altered", m.Segment, size, m.Bytes)}
	}
	return nil
}
