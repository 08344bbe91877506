package embedded

import (
	"os"

	bolt "go.etcd.io/bbolt"
)

// SetRowLogMerge sets the row log's thresholds: the rows or bytes logged
// at which they are frozen, and the least frozen rows a commit merges.
func SetRowLogMerge(s *Store, rows, bytes, slice int) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.rows.mergeRows, s.rows.mergeBytes, s.rows.mergeSlice = rows, bytes, slice
}

// StoredRow is the stored value of the row key of bucket ("sources" or
// "entities") in tx: the row log's newest, else the bucket's.
func StoredRow(tx *bolt.Tx, bucket string, key []byte) []byte {
	var v []byte
	if lb := tx.Bucket(bucketRowLog); lb != nil {
		kind := kindOf([]byte(bucket))
		_ = lb.ForEach(func(k, c []byte) error {
			return readChunk(k, c, func(r loggedRow) {
				if r.kind == kind && r.key == string(key) {
					v = r.value
				}
			})
		})
	}
	if v == nil {
		v = tx.Bucket([]byte(bucket)).Get(key)
	}
	return v
}

// LoggedRows is the number of rows the row log holds in memory: the
// active rows and the frozen ones.
func LoggedRows(s *Store) int {
	v := s.rows.current()
	n := v.active.len()
	if v.frozen != nil {
		n += v.frozen.len()
	}
	return n
}

// SetDrainSliced has fn called after each transaction of the drain that
// Close makes of the row log.
func SetDrainSliced(s *Store, fn func()) { s.drainSliced = fn }

// LeafRanges is where prefetch asks the kernel to read the leaf pages of
// bucket, found from its branch pages: offsets and lengths.
func LeafRanges(s *Store, bucket string) [][2]int64 {
	f, err := os.Open(s.path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	var rs [][2]int64
	for _, r := range s.leafRanges(f, []byte(bucket)) {
		rs = append(rs, [2]int64{r.off, r.len})
	}
	return rs
}

// PrefetchRanges is where prefetch asks the kernel to read the chunks of
// bucket ("keys": its leaf pages, "rowlog": its values) in the store's
// file: offsets and lengths.
func PrefetchRanges(s *Store, bucket string) [][2]int64 {
	f, err := os.Open(s.path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	ranges := s.valueRanges(bucketRowLog)
	if bucket == "keys" {
		ranges = joinRanges(append(s.leafRanges(f, bucketKeys), s.valueRanges(bucketKeys)...))
	}
	var rs [][2]int64
	for _, r := range ranges {
		rs = append(rs, [2]int64{r.off, r.len})
	}
	return rs
}

// View runs fn in a read transaction of s.
func View(s *Store, fn func(*bolt.Tx) error) error { return s.view(fn) }

// SetMinFilterKeys sets the least number of keys a row filter is sized
// for, and returns a function that sets it back.
func SetMinFilterKeys(n int) (restore func()) {
	old := minFilterKeys
	minFilterKeys = n
	return func() { minFilterKeys = old }
}

// WaitFilters waits until the row filters being built are built.
func WaitFilters(s *Store) { s.filtering.Wait() }

// FilterMayHold says whether the row filter reads consult now may hold
// key in the tree of kind ("sources" or "entities"): true when none is
// built. built says whether one is.
func FilterMayHold(s *Store, bucket, key string) (mayHold, built bool) {
	f := s.filters.current()[filterOf(kindOf([]byte(bucket)))]
	return f == nil || f.holds(key), f != nil
}
