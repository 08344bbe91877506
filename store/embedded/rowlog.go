package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// A fleet's rows come in no order: a row put into its tree rewrites a page
// of its own, where a chunk of a log writes a page for every few dozen
// rows. So a commit puts into their trees only the rows that land near
// each other (nearKind), and appends the others to the row log, one chunk
// a commit. The log's rows are kept in memory, where reads look first.
// Once the log holds mergeRows distinct rows or mergeBytes of chunks, the
// rows logged so far are frozen and written into their trees in key order,
// a slice in each of the commits that follow (mergeSlice), which rewrites
// each page of a tree once for many batches' rows and bounds what one
// transaction changes; the last slice's commit deletes their chunks. Open
// reads the log back. The log's value of a row is the newer, and a row the
// log holds is logged again rather than put into its tree.
//
//	rowlog   big-endian chunk number -> rows: kind (1: 's' source, 'e'
//	         entity) | uvarint key length | key | uvarint value length | value
var bucketRowLog = []byte("rowlog")

// rowLogSince is the layout version from which rows may be in the row
// log, which a build of an older version would not read.
const rowLogSince = 6

const (
	// mergeRows and mergeBytes bound the rows logged before they are
	// frozen: what the log keeps in memory (twice, while the frozen rows
	// are merged, about 100 bytes a meter's row) and what Open reads
	// back. Each freeze rewrites nearly every page of trees whose rows
	// came in no order: half as many freezes took a shuffled fleet's
	// ingest from 29.8 to 25.4 s.
	mergeRows  = 1 << 19
	mergeBytes = 64 << 20
	// mergeSlice is the least number of frozen rows a commit merges; it
	// merges at least twice the rows it logs, so that the frozen rows are
	// merged before the log holds mergeRows again.
	mergeSlice = 1 << 14
)

const (
	kindSource = 's'
	kindEntity = 'e'
)

// rowLog is the row log's rows in memory. Commits change it one at a time
// (Store.commitMu), after their transaction commits.
type rowLog struct {
	mu   sync.RWMutex
	view *rowView // what a read that begins now takes
	// The rest belongs to the committer.
	next  uint64 // the next chunk's number
	bytes int    // the size of the active rows' chunks
	// frozen is the offsets of the frozen rows in the view's frozen
	// rows, in order of kind and key, merged are those written into
	// their trees, and chunks below frozenBelow are theirs.
	frozen      []int
	merged      int
	frozenBelow uint64
	// mergeRows, mergeBytes and mergeSlice are the thresholds (tests
	// set them low).
	mergeRows, mergeBytes, mergeSlice int
}

// rowView is what a read takes with its transaction: the rows logged since
// the last freeze, and the frozen rows (nil when none), which no commit
// changes. A commit adds its logged rows to active; a freeze or the end of
// a merge makes a new view.
type rowView struct{ active, frozen *rowGen }

// loggedRow is one row of a chunk.
type loggedRow struct {
	kind  byte
	key   string
	value []byte
}

// compareRows orders rows by kind, then key.
func compareRows(a, b loggedRow) int {
	if a.kind != b.kind {
		return int(a.kind) - int(b.kind)
	}
	return strings.Compare(a.key, b.key)
}

// kindOf is the kind of the rows of bucket name.
func kindOf(name []byte) byte {
	if bytes.Equal(name, bucketSources) {
		return kindSource
	}
	return kindEntity
}

// current is the view a read that begins now takes.
func (l *rowLog) current() *rowView {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.view
}

// get returns v's row key of kind; nil when the log holds none.
func (l *rowLog) get(v *rowView, kind byte, key string) []byte {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if r, ok := v.active.get(kind, key); ok {
		return r
	}
	if v.frozen != nil {
		r, _ := v.frozen.get(kind, key)
		return r
	}
	return nil
}

// empty says whether the log holds no row. Called by the committer.
func (l *rowLog) empty() bool { return l.view.active.len() == 0 && l.view.frozen == nil }

// holds says whether the log holds row key of kind. Called by the
// committer (Store.commitMu held), the one that changes the log: it reads
// without the lock.
func (l *rowLog) holds(kind byte, key string) bool {
	if _, ok := l.view.active.get(kind, key); ok {
		return true
	}
	if l.view.frozen != nil {
		_, ok := l.view.frozen.get(kind, key)
		return ok
	}
	return false
}

// sorted returns v's rows of kind in key order, the active row where both
// hold one.
func (l *rowLog) sorted(v *rowView, kind byte) []loggedRow {
	l.mu.RLock()
	var rows []loggedRow
	add := func(g, newer *rowGen) {
		for _, off := range g.offsets(kind) {
			_, k, r := g.row(off)
			key := string(k)
			if newer != nil {
				if _, ok := newer.get(kind, key); ok {
					continue
				}
			}
			rows = append(rows, loggedRow{kind, key, r})
		}
	}
	if v.frozen != nil {
		add(v.frozen, v.active)
	}
	add(v.active, nil)
	l.mu.RUnlock()
	slices.SortFunc(rows, compareRows)
	return rows
}

// appendChunk encodes rows as one chunk of the log.
func appendChunk(dst []byte, rows []loggedRow) []byte {
	for _, r := range rows {
		dst = appendRow(dst, r.kind, r.key, r.value)
	}
	return dst
}

// chunkSize is the size of rows' chunk, within a few bytes a row.
func chunkSize(rows []loggedRow) int {
	n := 0
	for _, r := range rows {
		n += 1 + 2*binary.MaxVarintLen16 + len(r.key) + len(r.value)
	}
	return n
}

// readChunk calls fn with each row of the chunk v; the row's value is
// v's, which belongs to the transaction.
func readChunk(k, v []byte, fn func(loggedRow)) error {
	for len(v) > 0 {
		kind := v[0]
		if kind != kindSource && kind != kindEntity {
			return fmt.Errorf("embedded: corrupt row log chunk %x: row kind %q", k, kind)
		}
		key, rest, ok := lengthPrefixed(v[1:])
		if !ok {
			return fmt.Errorf("embedded: corrupt row log chunk %x: a row's key is cut short", k)
		}
		value, rest, ok := lengthPrefixed(rest)
		if !ok {
			return fmt.Errorf("embedded: corrupt row log chunk %x: row %q's value is cut short", k, key)
		}
		fn(loggedRow{kind, string(key), value})
		v = rest
	}
	return nil
}

// lengthPrefixed splits a uvarint-length-prefixed field off b.
func lengthPrefixed(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

// loadRowLog reads the log of tx into memory, every row active: a merge
// cut short by a crash starts again from the first row.
func loadRowLog(tx *bolt.Tx) (*rowLog, error) {
	l := &rowLog{view: &rowView{active: newRowGen()}, mergeRows: mergeRows, mergeBytes: mergeBytes, mergeSlice: mergeSlice}
	b := tx.Bucket(bucketRowLog)
	if b == nil { // a store of an older layout, opened read-only
		return l, nil
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 {
			return nil, fmt.Errorf("embedded: corrupt row log key %x", k)
		}
		err := readChunk(k, v, func(r loggedRow) { // set copies the row out of the transaction
			l.view.active.set(r.kind, r.key, r.value)
		})
		if err != nil {
			return nil, err
		}
		l.next, l.bytes = binary.BigEndian.Uint64(k)+1, l.bytes+len(v)
	}
	return l, nil
}

// withRows runs fn in a read transaction with the log's view that goes
// with it: one taken when no new view was made between its start and the
// transaction's. (A merge's last commit comes before the view without its
// rows, so a view taken with an earlier transaction holds every row the
// transaction's trees lack.)
func (s *Store) withRows(fn func(tx *bolt.Tx, v *rowView) error) error {
	for {
		v := s.rows.current()
		err := s.view(func(tx *bolt.Tx) error {
			if s.rows.current() != v {
				return errNewView
			}
			return fn(tx, v)
		})
		if !errors.Is(err, errNewView) {
			return err
		}
	}
}

// errNewView is a read that began across a change of view, to begin again.
var errNewView = errors.New("embedded: the row log's view changed while the read began")

// forEachRow calls fn with each row of kind, in key order: those of b,
// except where v holds a newer one, and those of v.
func (s *Store) forEachRow(b *bolt.Bucket, v *rowView, kind byte, fn func(k, v []byte) error) error {
	logged := s.rows.sorted(v, kind)
	err := b.ForEach(func(k, val []byte) error {
		for len(logged) > 0 && logged[0].key <= string(k) {
			r := logged[0]
			logged = logged[1:]
			if err := fn([]byte(r.key), r.value); err != nil {
				return err
			}
			if r.key == string(k) {
				return nil // the log's is the newer
			}
		}
		return fn(k, val)
	})
	if err != nil {
		return err
	}
	for _, r := range logged {
		if err := fn([]byte(r.key), r.value); err != nil {
			return err
		}
	}
	return nil
}
