package embedded

import (
	"encoding/binary"
	"slices"

	bolt "go.etcd.io/bbolt"
)

const (
	// nearKeys is how many stored keys apart two of a batch's rows may
	// be and still be near: a tenth of a page of rows, so that a tree's
	// page takes several of a batch's rows. At 32 (a page) a million
	// meters drawn at random were put into their tree while it held up
	// to 170,000 rows, a page rewritten for every one or two of them
	// (130,000 of the ingest's 250,000 page writes).
	nearKeys = 4
	// nearSamples is how many pairs of a batch's rows of one kind, next
	// to each other in key order, are looked at to tell whether they
	// are near one another (a look is a descent of the tree).
	nearSamples = 16
)

// rowWrite is what a commit did with its rows, for rowLog.committed.
type rowWrite struct {
	logged   []loggedRow // in the commit's chunk; none, no chunk
	bytes    int         // the chunk's size
	mergedTo int         // the frozen rows written into their trees so far
	unfreeze bool        // the commit wrote the last frozen rows and deleted their chunks
	freeze   bool        // the active rows are frozen once the commit is in
}

// putRowLog writes a commit's rows: those near one another into their
// trees, the rest as a chunk of the log, and the next slice of the frozen
// rows into their trees.
func (s *Store) putRowLog(tx *bolt.Tx, rows []loggedRow) (rowWrite, error) {
	l := s.rows
	w := rowWrite{mergedTo: l.merged}
	direct, logged := s.splitRows(tx, rows)
	if err := putRows(tx, direct, s); err != nil {
		return w, err
	}
	if len(logged) > 0 {
		chunk := appendChunk(make([]byte, 0, chunkSize(logged)), logged)
		lb := tx.Bucket(bucketRowLog)
		lb.FillPercent = 1 // numbers ascend: pack pages full
		if err := lb.Put(u64(l.next), chunk); err != nil {
			return w, err
		}
		w.logged, w.bytes = logged, len(chunk)
	}
	full := l.view.active.len()+len(logged) >= l.mergeRows || l.bytes+w.bytes >= l.mergeBytes
	if l.frozen == nil {
		w.freeze = full
		return w, nil
	}
	// At least mergeSlice and twice the rows w logs, all that are left
	// when the active rows are full (they freeze next).
	n := max(l.mergeSlice, 2*len(w.logged))
	if full {
		n = len(l.frozen)
	}
	return w, l.mergeSliceTx(tx, &w, n, s)
}

// mergeSliceTx writes the next n frozen rows into their trees; the last
// slice deletes the frozen rows' chunks.
func (l *rowLog) mergeSliceTx(tx *bolt.Tx, w *rowWrite, n int, s *Store) error {
	w.mergedTo = min(l.merged+n, len(l.frozen))
	if err := putFrozen(tx, l.view.frozen, l.frozen[l.merged:w.mergedTo], s); err != nil {
		return err
	}
	if w.mergedTo < len(l.frozen) {
		return nil
	}
	w.unfreeze = true
	return deleteChunks(tx.Bucket(bucketRowLog), l.frozenBelow)
}

// deleteChunks deletes the chunks numbered below n.
func deleteChunks(b *bolt.Bucket, n uint64) error {
	c := b.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < n; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// drain writes every row of the log into its tree and deletes its
// chunks, a transaction for each mergeSlice rows (a transaction holds
// each page it changes in memory: four times as many rows took a fleet's
// store from 1.15 to 1.47 GB of RSS): Close does, so that the next Open
// reads no log back. A crash between them leaves the log as one between
// the commits of a merge does.
func (s *Store) drain() error {
	l := s.rows
	for !l.empty() {
		if l.view.frozen == nil { // the active rows, which the loop's test found
			l.freeze()
			continue
		}
		w := rowWrite{mergedTo: l.merged}
		err := s.update(func(tx *bolt.Tx) error { return l.mergeSliceTx(tx, &w, l.mergeSlice, s) })
		if err != nil {
			return err
		}
		l.committed(w)
		if s.drainSliced != nil {
			s.drainSliced()
		}
	}
	return nil
}

// unmerged is the number of rows the log holds that are not in their
// trees yet (a row logged again since its freeze counts twice).
// Called by the committer.
func (l *rowLog) unmerged() int { return l.view.active.len() + len(l.frozen) - l.merged }

// committed takes in what a committed transaction did with its rows.
// The committer reads its own view without the lock; it alone changes it.
func (l *rowLog) committed(w rowWrite) {
	l.mu.Lock()
	for _, r := range w.logged {
		l.view.active.set(r.kind, r.key, r.value)
	}
	l.mu.Unlock()
	if w.logged != nil {
		l.next++
		l.bytes += w.bytes
	}
	l.merged = w.mergedTo
	switch {
	case w.unfreeze:
		l.setView(&rowView{active: l.view.active})
		l.frozen, l.merged = nil, 0
	case w.freeze:
		l.freeze()
	}
}

// freeze makes the active rows the frozen ones, in key order, to be
// merged into their trees, and begins new active rows. Called by the
// committer.
func (l *rowLog) freeze() {
	v := &rowView{active: newRowGen(), frozen: l.view.active}
	l.frozen = v.frozen.sortedOffsets()
	l.setView(v)
	l.merged, l.frozenBelow, l.bytes = 0, l.next, 0
}

func (l *rowLog) setView(v *rowView) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.view = v
}

// splitRows parts a batch's rows into those put into their trees, in
// order of kind and key (rows of one key in the batch's order), and those
// logged, in the batch's order: rows the log holds are logged, and the
// others of a kind are put when they are near one another (nearKind).
// Called by the committer.
func (s *Store) splitRows(tx *bolt.Tx, rows []loggedRow) (direct, logged []loggedRow) {
	inLog := make([]bool, len(rows))
	order := make([]int, 0, len(rows)) // the rows the log does not hold, in order of kind and key
	empty := s.rows.empty()
	for i, r := range rows {
		if inLog[i] = !empty && s.rows.holds(r.kind, r.key); !inLog[i] {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := compareRows(rows[a], rows[b]); c != 0 {
			return c
		}
		return a - b
	})
	near := nearKinds(tx, rows, order)
	for _, i := range order {
		if near[rows[i].kind] {
			direct = append(direct, rows[i])
		}
	}
	for i, r := range rows {
		if inLog[i] || !near[r.kind] {
			logged = append(logged, r)
		}
	}
	return direct, logged
}

// nearKinds says for each kind whether the rows of order (indexes into
// rows, in order of kind and key) are near one another in its tree.
func nearKinds(tx *bolt.Tx, rows []loggedRow, order []int) map[byte]bool {
	keys := map[byte][]string{} // distinct, in key order
	for j, i := range order {
		if j == 0 || compareRows(rows[order[j-1]], rows[i]) != 0 {
			keys[rows[i].kind] = append(keys[rows[i].kind], rows[i].key)
		}
	}
	return map[byte]bool{
		kindSource: nearKind(tx.Bucket(bucketSources).Cursor(), keys[kindSource]),
		kindEntity: nearKind(tx.Bucket(bucketEntities).Cursor(), keys[kindEntity]),
	}
}

// nearKind says whether keys, a batch's distinct rows of one kind in key
// order, are near one another in c's bucket: at least half of nearSamples
// pairs of them, next to each other, within nearKeys stored keys. A batch
// of a few rows is never near: each would change a page of its own.
func nearKind(c *bolt.Cursor, keys []string) bool {
	if len(keys) < 2*nearSamples {
		return false
	}
	step, near := (len(keys)-1)/nearSamples, 0
	for i := range nearSamples {
		if within(c, keys[i*step], keys[i*step+1]) {
			near++
		}
	}
	return 2*near >= nearSamples
}

// rowFill is how full a page of sources or entities is left when it
// splits: rows are put in key order, and most of a fleet's rows, once
// written, are rewritten in place rather than joined by new neighbours.
const rowFill = 0.9

// putRows writes rows, in order of kind and key, into their buckets.
func putRows(tx *bolt.Tx, rows []loggedRow, s *Store) error {
	put := s.rowPutter(tx)
	for _, r := range rows {
		if err := put(r.kind, []byte(r.key), r.value); err != nil {
			return err
		}
	}
	return nil
}

// putFrozen writes the rows of g at offs, in order of kind and key, into
// their buckets. (g's bytes outlive the transaction, as bbolt asks.)
func putFrozen(tx *bolt.Tx, g *rowGen, offs []int, s *Store) error {
	put := s.rowPutter(tx)
	for _, off := range offs {
		if err := put(g.row(off)); err != nil {
			return err
		}
	}
	return nil
}

// rowPutter returns a function that puts a row into its bucket of tx,
// its key into the bucket's filters first (rowfilter.go).
func (s *Store) rowPutter(tx *bolt.Tx) func(kind byte, key, value []byte) error {
	sources, entities := tx.Bucket(bucketSources), tx.Bucket(bucketEntities)
	sources.FillPercent, entities.FillPercent = rowFill, rowFill
	return func(kind byte, key, value []byte) error {
		s.filters.add(kind, key)
		s.refilter(filterOf(kind))
		if kind == kindSource {
			return sources.Put(key, value)
		}
		return entities.Put(key, value)
	}
}

// within says whether fewer than nearKeys stored keys lie from a up to b
// (a < b) in c's bucket.
func within(c *bolt.Cursor, a, b string) bool {
	k, _ := c.Seek([]byte(a))
	for range nearKeys {
		if k == nil || string(k) >= b {
			return true
		}
		k, _ = c.Next()
	}
	return false
}

// rowID names a row.
type rowID struct {
	kind byte
	key  string
}
