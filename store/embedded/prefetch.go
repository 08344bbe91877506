package embedded

import (
	"cmp"
	"encoding/binary"
	"os"
	"slices"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// prefetch asks the kernel, in the background, to read into the page
// cache the row log's chunks and the key window's, each range of
// neighbouring pages as one read, before the store's opening reads them.
// bbolt maps its file for random access, so that a page is read from disk
// when first touched and no further: the chunks, appended wherever the
// file had free pages, took a read of a page each from a cold cache
// (15,946 of them, 1.1 s, for a million keys; 0.6 s for a log of 265,655
// rows). A log chunk spans pages of its own, found from the log's leaf
// pages (valueRanges); a key chunk fills most of a page, two or more to a
// leaf, and the leaves are found from the key window's branch pages
// (leafRanges), so that they are asked for before anything reads them.
// It stops at Close, which waits for it.
func (s *Store) prefetch() {
	s.prefetching.Go(func() {
		f, err := os.Open(s.path)
		if err != nil {
			return // the reads that follow say what is wrong
		}
		defer f.Close()
		for _, ranges := range []func() []fileRange{
			func() []fileRange { return s.valueRanges(bucketRowLog) },
			func() []fileRange { return s.leafRanges(f, bucketKeys) },
			func() []fileRange { return s.valueRanges(bucketKeys) }, // the leaves' pages past leafPages
		} {
			for _, r := range ranges() {
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
	return joinRanges(rs)
}

// joinRanges sorts rs and joins the ranges that meet or overlap; an
// empty one is dropped (to posix_fadvise, a length of 0 is the rest of
// the file).
func joinRanges(rs []fileRange) []fileRange {
	slices.SortFunc(rs, func(a, b fileRange) int { return cmp.Compare(a.off, b.off) })
	joined := rs[:0]
	for _, r := range rs {
		if r.len <= 0 {
			continue
		}
		if n := len(joined); n > 0 && joined[n-1].off+joined[n-1].len >= r.off {
			joined[n-1].len = max(joined[n-1].len, r.off+r.len-joined[n-1].off)
			continue
		}
		joined = append(joined, r)
	}
	return joined
}

// bbolt's page header, in the host's byte order: id (8), flags (2),
// count (2), overflow (4); a branch page's elements follow it, 16 bytes
// each, the child's page id at 8.
const (
	pageHeader     = 16
	branchElement  = 16
	branchPageFlag = 0x01
	leafPageFlag   = 0x02
)

// leafRanges returns where the leaf pages of bucket name lie in the file,
// ranges next to one another joined: its branch pages, read from f, name
// them, and the first child of each says whether its children are leaves
// (all children of a branch are at one depth), which are not read. A page
// that does not read as the one its parent names ends the walk of its
// subtree (the store's own reads say what is wrong).
func (s *Store) leafRanges(f *os.File, name []byte) []fileRange {
	var rs []fileRange
	_ = s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(name)
		if b == nil || b.Root() == 0 { // an inline bucket: no page of its own
			return nil
		}
		size := int64(tx.DB().Info().PageSize)
		w := pageWalk{f: f, size: size, pages: tx.Size() / size, seen: map[uint64]bool{}}
		rs = w.leaves(uint64(b.Root()), 0, s)
		return nil
	})
	return joinRanges(rs)
}

// pageWalk reads the branch pages of one tree of the file in a read
// transaction (which keeps them from being written over).
type pageWalk struct {
	f           *os.File
	size, pages int64           // the page size, and the pages the transaction's file holds
	seen        map[uint64]bool // the pages walked: a damaged tree may name one twice
}

// leafPages is the pages a leaf is asked for, where its own header is not
// read: bbolt puts two entries at least in a leaf (and up to four before
// it splits one), and a key chunk fills most of a page, so that most of
// the key window's leaves span two pages.
const leafPages = 2

// maxDepth bounds the walk's depth in a damaged tree (seen, its breadth).
const maxDepth = 32

// leaves returns the leaf pages under page id.
func (w pageWalk) leaves(id uint64, depth int, s *Store) []fileRange {
	if w.seen[id] {
		return nil
	}
	w.seen[id] = true
	page, ok := w.read(id)
	switch {
	case !ok || depth > maxDepth || s.closed.Load():
		return nil
	case page.flags&leafPageFlag != 0:
		return []fileRange{w.span(id, 1+int64(page.overflow))}
	case page.flags&branchPageFlag == 0 || len(page.children) == 0:
		return nil
	}
	if first, ok := w.read(page.children[0]); ok && first.flags&leafPageFlag != 0 {
		rs := make([]fileRange, len(page.children))
		for i, c := range page.children {
			rs[i] = w.span(c, max(1+int64(first.overflow), leafPages))
		}
		return rs
	}
	var rs []fileRange
	for _, c := range page.children {
		rs = append(rs, w.leaves(c, depth+1, s)...)
	}
	return rs
}

// span is the range of n pages from page id, cut at the transaction's
// last page.
func (w pageWalk) span(id uint64, n int64) fileRange {
	return fileRange{int64(id) * w.size, max(min(n, w.pages-int64(id)), 0) * w.size}
}

// walkedPage is what leaves needs of a page.
type walkedPage struct {
	flags    uint16
	overflow uint32
	children []uint64 // a branch page's
}

// read reads page id's header, and a branch page's children; false when
// it is not in the file or does not say it is page id.
func (w pageWalk) read(id uint64) (walkedPage, bool) {
	if id < 2 || int64(id) >= w.pages {
		return walkedPage{}, false
	}
	buf := make([]byte, w.size)
	if _, err := w.f.ReadAt(buf, int64(id)*w.size); err != nil || binary.NativeEndian.Uint64(buf) != id {
		return walkedPage{}, false
	}
	p := walkedPage{flags: binary.NativeEndian.Uint16(buf[8:]), overflow: binary.NativeEndian.Uint32(buf[12:])}
	if p.flags&branchPageFlag != 0 {
		n := int(binary.NativeEndian.Uint16(buf[10:]))
		for i := range min(n, (len(buf)-pageHeader)/branchElement) {
			p.children = append(p.children, binary.NativeEndian.Uint64(buf[pageHeader+i*branchElement+8:]))
		}
	}
	return p, true
}
