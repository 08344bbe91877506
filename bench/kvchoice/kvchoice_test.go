// Package kvchoice holds the measurement behind the choice of bbolt over
// Pebble for the embedded store (store/embedded): the raw write pattern of
// the engine's group commits, on both engines. It lives in the bench module
// so that Pebble is no dependency of replayguard's own module.
//
//	cd bench && go test -run '^$' -bench 'Bolt|Pebble' -benchtime=1000x -count=2 ./kvchoice/
//
// Each benchmark first fills a 1M-entry key window and 1M audit records
// without fsync, then measures synced commits of 1000 decisions.

package kvchoice_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	bolt "go.etcd.io/bbolt"
)

// The workload of one group commit: per decision one audit record and one key
// entry; per batch a handful of source and entity upserts; eviction of as many
// key entries as were added once the window holds windowSize entries.
const (
	batchSize  = 1000
	windowSize = 1_000_000
	nSources   = 8
	nEntities  = 16
)

type kv struct{ k, v []byte }

type workload struct {
	next      uint64 // next position/ordinal
	auditJSON []byte
	keyVal    []byte
	srcVal    []byte
	entVal    []byte
}

func newWorkload() *workload {
	// Sizes as the real encodings produce them: an audit record's JSON, a
	// source window with a 4096-bit bitmap, an entity with two fields.
	a := []byte(`{"position":1234567,"time":"2025-01-02T03:04:05.123456789Z","route":"incidents","topic":"incidents/agency-7/unit-12","source":["agency-7","dev-000123"],"epoch":"1700000000","sequence":42,"key":"0100000000000000000000000000000000000000000000000000000000000000","digest":"0200000000000000000000000000000000000000000000000000000000000000","outcome":"applied","dup":false,"broker":"tcp://127.0.0.1:1883","prev":"0300000000000000000000000000000000000000000000000000000000000000","hash":"0400000000000000000000000000000000000000000000000000000000000000"}`)
	s := make([]byte, 600)
	e := make([]byte, 100)
	return &workload{auditJSON: a, keyVal: make([]byte, 80), srcVal: s, entVal: e}
}

func be(prefix byte, n uint64) []byte {
	b := make([]byte, 9)
	b[0] = prefix
	binary.BigEndian.PutUint64(b[1:], n)
	return b
}

// batch returns the writes of one batch and the eviction bound.
func (w *workload) batch() (audit, keys, srcs, ents []kv, evictBelow uint64) {
	for range batchSize {
		w.next++
		audit = append(audit, kv{be('a', w.next), w.auditJSON})
		keys = append(keys, kv{be('k', w.next), w.keyVal})
	}
	for i := range nSources {
		srcs = append(srcs, kv{[]byte(fmt.Sprintf("s-source-%03d", (int(w.next)+i*7)%500)), w.srcVal})
	}
	for i := range nEntities {
		ents = append(ents, kv{[]byte(fmt.Sprintf("e-incident/%04d", (int(w.next)+i*13)%3000)), w.entVal})
	}
	if w.next > windowSize {
		evictBelow = w.next - windowSize + 1
	}
	return
}

type backend interface {
	commit(audit, keys, srcs, ents []kv, evictBelow uint64) error
	setSync(bool)
	close() error
}

// bbolt

type boltDB struct {
	db      *bolt.DB
	evicted uint64
}

var bA, bK, bS, bE = []byte("a"), []byte("k"), []byte("s"), []byte("e")

func openBolt(dir string) (*boltDB, error) {
	db, err := bolt.Open(dir+"/db", 0o600, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType, NoFreelistSync: true})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, n := range [][]byte{bA, bK, bS, bE} {
			if _, err := tx.CreateBucketIfNotExists(n); err != nil {
				return err
			}
		}
		return nil
	})
	return &boltDB{db: db, evicted: 1}, err
}

func (b *boltDB) setSync(s bool) { b.db.NoSync = !s }
func (b *boltDB) close() error   { return b.db.Close() }

func (b *boltDB) commit(audit, keys, srcs, ents []kv, evictBelow uint64) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		a, k, s, e := tx.Bucket(bA), tx.Bucket(bK), tx.Bucket(bS), tx.Bucket(bE)
		a.FillPercent, k.FillPercent = 1, 1
		for _, x := range audit {
			if err := a.Put(x.k, x.v); err != nil {
				return err
			}
		}
		for _, x := range keys {
			if err := k.Put(x.k, x.v); err != nil {
				return err
			}
		}
		for _, x := range srcs {
			if err := s.Put(x.k, x.v); err != nil {
				return err
			}
		}
		for _, x := range ents {
			if err := e.Put(x.k, x.v); err != nil {
				return err
			}
		}
		if evictBelow > 0 {
			c := k.Cursor()
			lim := be('k', evictBelow)
			for key, _ := c.First(); key != nil && string(key) < string(lim); key, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// pebble

type pebbleDB struct {
	db          *pebble.DB
	sync        bool
	pointDelete bool   // delete evicted keys one by one instead of a range tombstone
	evicted     uint64 // lowest ordinal not yet deleted
}

func openPebble(dir string) (*pebbleDB, error) {
	db, err := pebble.Open(dir, &pebble.Options{})
	return &pebbleDB{db: db, sync: true}, err
}

func (p *pebbleDB) setSync(s bool) { p.sync = s }
func (p *pebbleDB) close() error   { return p.db.Close() }

func (p *pebbleDB) commit(audit, keys, srcs, ents []kv, evictBelow uint64) error {
	bt := p.db.NewBatch()
	defer bt.Close()
	for _, l := range [][]kv{audit, keys, srcs, ents} {
		for _, x := range l {
			if err := bt.Set(x.k, x.v, nil); err != nil {
				return err
			}
		}
	}
	if evictBelow > 0 && p.pointDelete {
		for ; p.evicted < evictBelow; p.evicted++ {
			if err := bt.Delete(be('k', p.evicted), nil); err != nil {
				return err
			}
		}
	} else if evictBelow > 0 {
		if err := bt.DeleteRange(be('k', 0), be('k', evictBelow), nil); err != nil {
			return err
		}
	}
	opt := pebble.NoSync
	if p.sync {
		opt = pebble.Sync
	}
	return bt.Commit(opt)
}

func benchBackend(b *testing.B, open func(dir string) (backend, error)) {
	dir := b.TempDir()
	db, err := open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer db.close()
	w := newWorkload()
	db.setSync(false)
	start := time.Now()
	for w.next < windowSize { // fill the window (and 1M audit records)
		if err := db.commit(w.batch()); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("prefill %d decisions in %v", w.next, time.Since(start))
	db.setSync(true)
	b.ResetTimer()
	for b.Loop() {
		if err := db.commit(w.batch()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "decisions/s")
}

func BenchmarkBolt(b *testing.B) {
	benchBackend(b, func(dir string) (backend, error) { return openBolt(dir) })
}

func BenchmarkPebble(b *testing.B) {
	benchBackend(b, func(dir string) (backend, error) { return openPebble(dir) })
}

func BenchmarkPebbleTuned(b *testing.B) {
	benchBackend(b, func(dir string) (backend, error) {
		db, err := pebble.Open(dir, &pebble.Options{MemTableSize: 64 << 20})
		return &pebbleDB{db: db, sync: true, pointDelete: true}, err
	})
}
