package embedded

import (
	"cmp"
	"os"
	"slices"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// prefetch asks the kernel, in the background, to read into the page
// cache the values of the buckets names, each as one read, before the
// store's opening reads them. bbolt maps its file for random access, so
// that a page is read from disk when first touched and no further: the
// key window's chunks and the row log's, appended wherever the file had
// free pages, took a read of a page each from a cold cache (15,946 of
// them, 1.1 s, for a million keys; 0.6 s for a log of 265,655 rows). A
// log chunk spans pages of its own, asked for at once; a key chunk fills
// a leaf page, which finding it reads, so for the keys this is a second
// reader beside the store's own. It stops at Close, which waits for it.
func (s *Store) prefetch(names ...[]byte) {
	s.prefetching.Go(func() {
		f, err := os.Open(s.path)
		if err != nil {
			return // the reads that follow say what is wrong
		}
		defer f.Close()
		for _, name := range names {
			for _, r := range s.valueRanges(name) {
				if s.closed.Load() {
					return
				}
				willNeed(f, r.off, r.len)
			}
		}
	})
}

// fileRange is a range of bytes of the store's file.
type fileRange struct{ off, len int64 }

// valueRanges returns where the values of bucket name lie in the file,
// ranges next to one another joined. It reads the bucket's branch and
// leaf pages, not the values: a value is a slice of the file's mapping.
func (s *Store) valueRanges(name []byte) []fileRange {
	var rs []fileRange
	_ = s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(name)
		if b == nil {
			return nil
		}
		base := tx.DB().Info().Data
		c := b.Cursor()
		for k, v := c.First(); k != nil && !s.closed.Load(); k, v = c.Next() {
			if len(v) > 0 {
				rs = append(rs, fileRange{int64(uintptr(unsafe.Pointer(unsafe.SliceData(v))) - base), int64(len(v))})
			}
		}
		return nil
	})
	slices.SortFunc(rs, func(a, b fileRange) int { return cmp.Compare(a.off, b.off) })
	joined := rs[:0]
	for _, r := range rs {
		if n := len(joined); n > 0 && joined[n-1].off+joined[n-1].len >= r.off {
			joined[n-1].len = max(joined[n-1].len, r.off+r.len-joined[n-1].off)
			continue
		}
		joined = append(joined, r)
	}
	return joined
}
