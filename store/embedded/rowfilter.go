package embedded

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// A fleet's meter is new to the store at its first reading: the engine
// looks its rows up, and a look-up of a row no tree holds descends the
// tree all the same, to a page of its own. In an ingest of a million
// shuffled sources such descents took 8.8 of the decider's 16.7 s of CPU
// (a source and two entities a message, nearly all absent). So each of
// the two trees has a Bloom filter of its keys in memory: a key the
// filter does not hold is in no tree, and is not looked for there.
//
// A filter must hold every key its tree holds, or a stored row would read
// as absent and be decided as new. Every put into the trees goes through
// rowPutter, which adds the key first; a filter being built (at open, or
// larger once the keys outgrow it) takes those puts too, and is filled
// from the tree by scans that begin after every transaction begun before
// it was set has ended. It goes into use while no write transaction is
// open: a put adds its key to the filter in use and then to the one being
// built, and a swap between the two left the key in the filter going out
// of use alone. A read takes the filters in use before it begins its
// transaction, so its snapshot is no older than their scans, and begins
// again if another took the place of one meanwhile (the one it took no
// longer takes puts, which its snapshot may hold). A row deleted from its
// tree stays in the filter (a look-up of it descends in vain). Until a
// filter is built, reads descend as before.

// rowFilter is a split-block Bloom filter: a key sets one bit in each of
// the eight words of one 32-byte block. Puts and reads run at once, so
// each word is atomic.
type rowFilter struct {
	seed   maphash.Seed
	blocks [][8]atomic.Uint32
	limit  int64        // the keys it was sized for
	keys   atomic.Int64 // the keys added that it did not hold already
}

const (
	// filterBits is the filter's bits a key: 1.5 bytes, and about one
	// key in two hundred not in the tree said to be there (its test).
	filterBits = 12
	// filterHeadroom is how many times the keys at its building a
	// filter is sized for; once it holds more than that it is built
	// again, larger.
	filterHeadroom = 2
	// filterScan is the keys a scan reads in one read transaction,
	// which a commit that grows the file's map waits for.
	filterScan = 1 << 16
)

// minFilterKeys is the least a filter is sized for (a variable: tests
// lower it to build many filters).
var minFilterKeys = 1 << 16

// filterSalt spreads a key's hash over the eight words of its block.
var filterSalt = [8]uint32{0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d, 0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31}

func newRowFilter(keys int) *rowFilter {
	keys = max(keys, minFilterKeys)
	return &rowFilter{seed: maphash.MakeSeed(), blocks: make([][8]atomic.Uint32, max(1, keys*filterBits/256)), limit: int64(keys)}
}

// block returns the block of the key whose hash is h, and the bits of h
// that pick its bit in each word.
func (f *rowFilter) block(h uint64) (*[8]atomic.Uint32, uint32) {
	return &f.blocks[(h>>32)*uint64(len(f.blocks))>>32], uint32(h)
}

// holds says whether key may be in the tree: false only when it is not.
func (f *rowFilter) holds(key string) bool { return f.holdsHash(maphash.String(f.seed, key)) }

func (f *rowFilter) holdsHash(h uint64) bool {
	b, x := f.block(h)
	for i, salt := range filterSalt {
		if b[i].Load()&(1<<((x*salt)>>27)) == 0 {
			return false
		}
	}
	return true
}

// add adds key.
func (f *rowFilter) add(key []byte) {
	h := maphash.Bytes(f.seed, key)
	if f.holdsHash(h) {
		return
	}
	b, x := f.block(h)
	for i, salt := range filterSalt {
		b[i].Or(1 << ((x * salt) >> 27))
	}
	f.keys.Add(1)
}

// full says whether f holds more keys than it was sized for.
func (f *rowFilter) full() bool { return f.keys.Load() > f.limit }

// rowFilters are the filters of the sources' tree (0) and the entities'
// (1): the one reads consult, nil until one is built, and the one being
// built.
type rowFilters struct {
	inUse, building [2]atomic.Pointer[rowFilter]
	pending         [2]*int    // the keys of those the first read builds; nil for none
	start           sync.Once  // of buildPending
	mu              sync.Mutex // a builder begins, or Close stops them
}

// filterTrees are the trees of the filters, in their order.
var filterTrees = [2][]byte{bucketSources, bucketEntities}

func filterOf(kind byte) int {
	if kind == kindSource {
		return 0
	}
	return 1
}

// current returns the filters reads consult now, nil where none is built.
func (fs *rowFilters) current() [2]*rowFilter {
	return [2]*rowFilter{fs.inUse[0].Load(), fs.inUse[1].Load()}
}

// add adds the key of a row put into its tree to its filters. Called in
// the write transaction that puts it.
func (fs *rowFilters) add(kind byte, key []byte) {
	i := filterOf(kind)
	if f := fs.inUse[i].Load(); f != nil {
		f.add(key)
	}
	if f := fs.building[i].Load(); f != nil {
		f.add(key)
	}
}

// mayHold says whether a tree may hold a key, by the filter f of a read:
// true when there is none.
func mayHold(f *rowFilter, key string) bool { return f == nil || f.holds(key) }

// startFilters sets the filters of a writable store's empty trees at
// open, and sizes those of the others, which the store's first read of
// the rows begins to build (buildPending): built at open, their scans
// read every page of the trees while run loads what it needs to be ready
// (2.2 → 3.1 s from a cold cache, a million meters). A store it cannot
// read has none: its reads descend, and say what is wrong.
func (s *Store) startFilters() {
	var stored rowCount
	var empty [2]bool
	var most uint64 // rows the file could hold: a count past it is not believed
	err := s.view(func(tx *bolt.Tx) error {
		stored, _ = readRowCount(tx.Bucket(bucketMeta)) // sizes the filters only
		most = uint64(tx.Size()) / 16
		for i, name := range filterTrees {
			k, _ := tx.Bucket(name).Cursor().First()
			empty[i] = k == nil
		}
		return nil
	})
	if err != nil {
		s.log.Warn("the row filters are not built: every row is looked for in its tree", "path", s.path, "err", err)
		return
	}
	for i, n := range [2]uint64{stored.sources, stored.entities} {
		if empty[i] {
			s.filters.inUse[i].Store(newRowFilter(0))
		} else {
			keys := filterHeadroom * int(min(n, most)) // none counted: the least size, built again as it fills
			s.filters.pending[i] = &keys
		}
	}
}

// buildPending begins to build the filters startFilters sized. Called
// once, by the first read of the rows.
func (s *Store) buildPending() {
	for i, keys := range s.filters.pending {
		if keys != nil {
			s.buildFilter(i, *keys)
		}
	}
}

// refilter builds a larger filter for tree i once the one in use is full,
// unless one is being built. Called in a write transaction.
func (s *Store) refilter(i int) {
	if f := s.filters.inUse[i].Load(); f != nil && f.full() && s.filters.building[i].Load() == nil {
		s.buildFilter(i, filterHeadroom*int(f.keys.Load()))
	}
}

// buildFilter sets a filter for tree i sized for keys as the one being
// built, and fills it in the background from the tree; once it is filled
// the reads consult it. One is built at a time for a tree: a second
// builder would take the puts from the first, which would then go into
// use without them. Nothing is built once the store is closing.
func (s *Store) buildFilter(i int, keys int) {
	s.filters.mu.Lock()
	defer s.filters.mu.Unlock()
	if s.closed.Load() || s.filters.building[i].Load() != nil {
		return
	}
	f := newRowFilter(keys)
	s.filters.building[i].Store(f)
	s.filtering.Go(func() {
		if !s.writersGone() || !s.scanInto(f, filterTrees[i]) || !s.useFilter(i, f) {
			// Closed, or the tree could not be read: the filter in use
			// goes on taking puts, and a later put may build again.
			s.filters.building[i].CompareAndSwap(f, nil)
			return
		}
		if f.full() {
			s.buildFilter(i, filterHeadroom*int(f.keys.Load()))
		}
	})
}

// useFilter puts the filter built for tree i into use, while no write
// transaction is open: a put takes the filter in use and then the one
// being built, and the swap of the two between those loads left the put's
// key in the filter going out of use alone (a stored row read as absent,
// 2 to 5 runs in 1,000 of TestTheRowFiltersNeverHideAStoredRow). False
// when the store closed first.
func (s *Store) useFilter(i int, f *rowFilter) bool {
	if s.filterBuilt != nil {
		s.filterBuilt()
	}
	return s.betweenWrites(func() {
		s.filters.mu.Lock() // after the writers' lock, as a put's refilter takes them
		defer s.filters.mu.Unlock()
		s.filters.inUse[i].Store(f)
		s.filters.building[i].Store(nil)
	})
}

// stopFilters has the filters' builders stop: none begins once it has
// returned, and Close waits for those running.
func (s *Store) stopFilters() {
	s.filters.mu.Lock()
	defer s.filters.mu.Unlock()
	s.closed.Store(true)
}

// writersGone waits until the write transaction in flight, if any, has
// ended: every later one adds its puts to the filters being built.
func (s *Store) writersGone() bool { return s.betweenWrites(func() {}) }

// betweenWrites runs do while no write transaction is open, holding the
// writers' lock in an empty one; false, do not run, when the store is
// closing or closed.
func (s *Store) betweenWrites(do func()) bool {
	if s.closed.Load() {
		return false
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return false
	}
	defer func() { _ = tx.Rollback() }()
	do()
	return true
}

// scanInto adds the keys of tree name to f, filterScan keys a read
// transaction; false when the store closed first.
func (s *Store) scanInto(f *rowFilter, name []byte) bool {
	var after []byte
	for {
		n, done := 0, false
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(name).Cursor()
			k, _ := c.Seek(after)
			if after != nil && string(k) == string(after) {
				k, _ = c.Next()
			}
			for ; k != nil && n < filterScan; k, _ = c.Next() {
				f.add(k)
				after = append(after[:0], k...)
				n++
			}
			done = k == nil
			return nil
		})
		if err != nil && !s.closed.Load() {
			s.log.Warn("a row filter is not built: rows are looked for in their tree", "path", s.path, "tree", string(name), "err", err)
		}
		if err != nil || s.closed.Load() {
			return false
		}
		if done {
			return true
		}
	}
}
