package journal

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Defaults for Options fields left zero.
const (
	DefaultRetention    = 15 * time.Minute
	DefaultSegmentBytes = 64 << 20
)

// ErrCorrupt is returned by Open for a segment that does not decode before
// its end: not a torn last append, but damage to what was written.
var ErrCorrupt = errors.New("journal: a segment is damaged")

// Options configure Open. The zero value of every field means its default.
type Options struct {
	// Retention is how long a batch stays in the journal after it was
	// appended; a segment leaves once its newest entry is older. Default
	// DefaultRetention. It bounds what a store failover can lose and still
	// be recovered: keep it above the longest a failover takes to be
	// noticed. It is measured by the entries' own times
	// (engine.JournalEntry.Time): a segment leaves when an entry appended
	// is more than Retention after its newest, whatever clock the entries
	// carry (the engine's is the group's, on a store that reads its
	// server's clock).
	Retention time.Duration
	// SegmentBytes is the size at which a segment is closed and the next
	// begun; segments older than Retention are deleted whole. Default
	// DefaultSegmentBytes.
	SegmentBytes int64
	// Logger receives trims and torn tails. Default: discard.
	Logger *slog.Logger
	// Now is the time given to an entry appended without one; default
	// time.Now.
	Now func() time.Time
	// ReadOnly opens an existing journal to read it while its member may
	// be appending to it (audit verify): nothing is created, cut off or
	// deleted, and Append returns engine.ErrClosed. A torn last append is
	// left out of what is read.
	ReadOnly bool
}

// Journal is an engine.Journal in one directory of segment files. Create
// it with Open; its methods are safe for concurrent use.
type Journal struct {
	dir  string
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	segs    []segment // oldest first; the last is the one appended to
	index   []entry   // every entry of segs, in append order
	f       *os.File  // the last segment, open for appending
	buf     []byte
	last    engine.JournalEntry  // the newest batch, messages left out
	pending *engine.JournalEntry // an unfinished recovery's start marker
	closed  bool
}

var _ engine.Journal = (*Journal)(nil)

// segment is one file, named by a number one above its predecessor's.
type segment struct {
	seq    uint64
	path   string
	size   int64
	begun  time.Time // the time of its first entry
	newest time.Time // the time of its newest entry
}

// entry is what the index keeps of one record: all but its messages.
type entry struct {
	engine.JournalEntry
	seg  int // index into segs when read; fixed up on trims by seq
	sseq uint64
	off  int64
	size int
}

// Dir returns the journal directory of member under root: one per member,
// so that several members on one machine can share a root.
func Dir(root, member string) string {
	name := url.PathEscape(member)
	switch name {
	case "":
		// "", "." and ".." would name root or its parent, not a directory
		// of their own; PathEscape makes neither "%" nor "%2E".
		name = "%"
	case ".", "..":
		name = strings.ReplaceAll(name, ".", "%2E")
	}
	return filepath.Join(root, name)
}

// Open opens or creates the journal in dir, reading every segment: a torn
// last append (a crash during it) is cut off, as it was never
// acknowledged.
func Open(dir string, o Options) (*Journal, error) {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReadOnly {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
	} else if err := makeDir(dir); err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, opts: o, log: o.Logger, closed: o.ReadOnly}
	if err := j.load(); err != nil {
		return nil, err
	}
	return j, nil
}

// load reads the segments into the index.
func (j *Journal) load() error {
	des, err := os.ReadDir(j.dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".seg")
		seq, err := strconv.ParseUint(name, 16, 64)
		if !ok || err != nil || !de.Type().IsRegular() {
			continue
		}
		j.segs = append(j.segs, segment{seq: seq, path: filepath.Join(j.dir, de.Name())})
	}
	slices.SortFunc(j.segs, func(a, b segment) int { return cmp.Compare(a.seq, b.seq) })
	for i := range j.segs {
		if err := j.read(i, i == len(j.segs)-1); err != nil {
			return err
		}
	}
	if j.opts.ReadOnly {
		return nil
	}
	if len(j.segs) == 0 {
		return j.roll()
	}
	f, err := os.OpenFile(j.segs[len(j.segs)-1].path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.f = f
	return nil
}

// read indexes segment i; a bad frame at the end of the last one is a torn
// append and is cut off. A bad frame followed by a good one is damage to
// what was written and synced: ErrCorrupt, as in any other segment.
func (j *Journal) read(i int, last bool) error {
	s := &j.segs[i]
	b, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	var off int64
	for int(off) < len(b) {
		e, n, err := frameAt(b[off:])
		if err != nil {
			if !last || followedByAFrame(b[off:]) {
				return fmt.Errorf("%w: %s at offset %d: %v", ErrCorrupt, s.path, off, err)
			}
			if j.opts.ReadOnly {
				break
			}
			j.log.Warn("journal: cutting off a torn last append", "segment", s.path, "offset", off, "bytes", len(b)-int(off))
			if err := os.Truncate(s.path, off); err != nil {
				return fmt.Errorf("journal: cut off a torn append: %w", err)
			}
			break
		}
		j.add(entry{JournalEntry: e, seg: i, sseq: s.seq, off: off, size: n})
		off += int64(n)
	}
	s.size = off
	return nil
}

// followedByAFrame reports whether the bad frame at the start of b is
// followed by a frame that decodes: it was not the last append, so it did
// not tear. Its length may be the damaged part, so where the next frame
// begins is not known: every later offset is tried, not only the one the
// length names (a changed length would otherwise cut off every synced,
// acknowledged record after it as a torn tail). A torn append is the last
// bytes of the file and holds no whole frame after its start.
func followedByAFrame(b []byte) bool {
	if len(b) < frameHeader {
		return false
	}
	if n := int(binary.LittleEndian.Uint32(b)); n <= maxFrame && len(b) >= frameHeader+n {
		if _, _, err := frameAt(b[frameHeader+n:]); err == nil {
			return true
		}
	}
	for off := 1; off+frameHeader <= len(b); off++ {
		if _, _, err := frameAt(b[off:]); err == nil {
			return true
		}
	}
	return false
}

// frameAt decodes the frame at the start of b, without its messages, and
// returns its length.
func frameAt(b []byte) (engine.JournalEntry, int, error) {
	if len(b) < frameHeader {
		return engine.JournalEntry{}, 0, io.ErrUnexpectedEOF
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n > maxFrame || len(b) < frameHeader+n {
		return engine.JournalEntry{}, 0, io.ErrUnexpectedEOF
	}
	body := b[frameHeader : frameHeader+n]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return engine.JournalEntry{}, 0, errCorrupt
	}
	e, err := decodeBody(body, false)
	return e, frameHeader + n, err
}

// add puts an entry read or appended into the index and the summary.
func (j *Journal) add(e entry) {
	j.index = append(j.index, e)
	s := &j.segs[len(j.segs)-1]
	if e.seg < len(j.segs) {
		s = &j.segs[e.seg]
	}
	if s.begun.IsZero() {
		s.begun = e.Time
	}
	s.newest = e.Time
	switch e.Kind {
	case engine.JournalBatch:
		j.last = e.JournalEntry
	case engine.JournalRecoveryStart:
		m := e.JournalEntry
		j.pending = &m
	case engine.JournalRecoveryDone:
		// Its head is the member's: after a failback, the store's, not that
		// of the recovery's batches written to the store it left.
		j.pending, j.last.Head = nil, e.Head
	}
}

// Append writes e and syncs it to disk before it returns.
func (j *Journal) Append(e engine.JournalEntry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return engine.ErrClosed
	}
	if err := valid(&e); err != nil {
		return err
	}
	if e.Time.IsZero() {
		e.Time = j.opts.Now()
	}
	j.buf = appendFrame(j.buf[:0], &e)
	s := &j.segs[len(j.segs)-1]
	if _, err := j.f.Write(j.buf); err != nil {
		// A partial write would be a torn frame that later appends hide
		// behind: cut it off now, or stop appending.
		if terr := j.f.Truncate(s.size); terr != nil {
			j.closed = true
		}
		return fmt.Errorf("journal: append to %s: %w", s.path, err)
	}
	if err := j.f.Sync(); err != nil {
		// The frame is in the file but not in the index, and later
		// entries would be indexed at the wrong offset: cut it off, or
		// stop appending.
		if terr := j.f.Truncate(s.size); terr != nil {
			j.closed = true
		}
		return fmt.Errorf("journal: sync %s: %w", s.path, err)
	}
	ent := entry{JournalEntry: e, seg: len(j.segs) - 1, sseq: s.seq, off: s.size, size: len(j.buf)}
	ent.Messages = nil
	j.add(ent)
	s.size += int64(len(j.buf))
	if s.size >= j.opts.SegmentBytes || e.Time.Sub(s.begun) >= j.opts.Retention/4 {
		j.rollOver(e.Time)
	}
	return nil
}

// rollOver begins the next segment after a full one, and trims the
// journal as of now, the time of the entry appended last. The entries are
// synced already: a segment that cannot be begun (a full disk) is logged
// and the full one appended to meanwhile, never an append that fails.
func (j *Journal) rollOver(now time.Time) {
	full := j.f
	if err := j.roll(); err != nil {
		j.log.Warn("journal: cannot begin a new segment; appending to the full one meanwhile", "err", err)
		return
	}
	if err := full.Close(); err != nil {
		j.log.Warn("journal: close a full segment", "err", err)
	}
	j.trim(now)
}

// valid rejects an entry that would not decode when read back: Open would
// take it for a torn append and cut it off with everything after it, or
// fail on it.
func valid(e *engine.JournalEntry) error {
	if e.Kind < engine.JournalBatch || e.Kind > engine.JournalRecoveryDone {
		return fmt.Errorf("journal: entry kind %d is not one of the journal's", e.Kind)
	}
	if e.Kind == engine.JournalBatch && (e.First == 0 || e.First > e.Head.Position) {
		return fmt.Errorf("journal: a batch's first position %d is not in 1..%d, its head's", e.First, e.Head.Position)
	}
	return nil
}

// roll starts a new segment after the last one.
func (j *Journal) roll() error {
	seq := uint64(1)
	if n := len(j.segs); n > 0 {
		seq = j.segs[n-1].seq + 1
	}
	path := filepath.Join(j.dir, fmt.Sprintf("%016x.seg", seq))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := syncDir(j.dir); err != nil {
		f.Close()
		os.Remove(path) // or the next try finds it there
		return err
	}
	j.f = f
	j.segs = append(j.segs, segment{seq: seq, path: path})
	return nil
}

// firstOf is the index position of segment i's first entry.
func (j *Journal) firstOf(i int) int {
	k, _ := slices.BinarySearchFunc(j.index, i, func(e entry, i int) int { return e.seg - i })
	return k
}

// trim deletes the oldest segments whose newest entry is older than the
// retention as of now, keeping the one appended to and the one before it,
// the one that holds the newest batch (markers may have followed it), and
// every one while a recovery is unfinished: it reads batches from before
// its start marker. now is the newest entry's time, not this process's
// clock: the entries' times are all on one clock, the one the engine
// gives them.
func (j *Journal) trim(now time.Time) {
	if j.pending != nil {
		return
	}
	cutoff := now.Add(-j.opts.Retention)
	keep := len(j.segs) - 2
	for i := len(j.index) - 1; i >= 0; i-- {
		if j.index[i].Kind == engine.JournalBatch {
			keep = min(keep, j.index[i].seg)
			break
		}
	}
	drop := 0
	for drop < keep && j.segs[drop].newest.Before(cutoff) && !j.holdsPending(drop) {
		drop++
	}
	if drop == 0 {
		return
	}
	for _, s := range j.segs[:drop] {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			j.log.Warn("journal: delete an expired segment", "segment", s.path, "err", err)
		}
	}
	first := j.firstOf(drop)
	j.index = slices.Delete(j.index, 0, first)
	j.segs = slices.Delete(j.segs, 0, drop)
	for i := range j.index {
		j.index[i].seg -= drop
	}
	j.log.Debug("journal: expired segments deleted", "segments", drop, "entries", first)
}

func (j *Journal) holdsPending(seg int) bool {
	if j.pending == nil {
		return false
	}
	for _, e := range j.index[j.firstOf(seg):j.firstOf(seg+1)] {
		if e.Kind == engine.JournalRecoveryStart {
			return true
		}
	}
	return false
}

// Last returns the newest batch, without its messages, and an unfinished
// recovery's start marker.
func (j *Journal) Last() (engine.JournalEntry, *engine.JournalEntry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var p *engine.JournalEntry
	if j.pending != nil {
		c := *j.pending
		p = &c
	}
	return j.last, p
}

// Stats describe the journal's size.
type Stats struct {
	Segments int
	Bytes    int64
	Entries  int
	Oldest   time.Time // the time of the oldest entry kept; zero when empty
}

// Stats returns the journal's size.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := Stats{Segments: len(j.segs), Entries: len(j.index)}
	for _, s := range j.segs {
		st.Bytes += s.size
	}
	if len(j.index) > 0 {
		st.Oldest = j.index[0].Time
	}
	return st
}

// Size is the bytes the journal holds and the time of its oldest entry,
// for the metrics.
func (j *Journal) Size() (int64, time.Time) {
	st := j.Stats()
	return st.Bytes, st.Oldest
}

// Dir is the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// Close closes the segment appended to. Later appends return
// engine.ErrClosed.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	if j.f == nil {
		return nil
	}
	return j.f.Close()
}

// makeDir creates dir and its missing parents, and syncs each new
// directory's entry in its parent: a journal whose directory a power loss
// took with it would hold nothing the member committed.
func makeDir(dir string) error {
	dir = filepath.Clean(dir)
	var made []string // the directories to create, deepest first
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	for _, d := range made {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("journal: sync %s: %w", dir, err)
	}
	return nil
}
