package embedded

import (
	"bytes"
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// bucketRoutes holds each route's key derivation: route name -> the
// engine's encoding of it (engine.KeyDerivation). Created by the first
// RecordRoutes, so a store written before derivations were recorded keeps
// its layout version, and records the routes of the next engine opened on
// it.
var bucketRoutes = []byte("routes")

var _ engine.RouteRecorder = (*Store)(nil)

// RecordRoutes records the key derivation of each route of want that has
// none, in one transaction synced like a commit, and returns the one held
// for each route of want. When every route of want is recorded already it
// only reads, also on a store opened read-only.
func (s *Store) RecordRoutes(ctx context.Context, want map[string][]byte) (map[string][]byte, error) {
	got := make(map[string][]byte, len(want))
	read := func(b *bolt.Bucket) bool {
		all := true
		for name := range want {
			var v []byte
			if b != nil {
				v = b.Get([]byte(name))
			}
			if v == nil {
				all = false
				continue
			}
			got[name] = bytes.Clone(v)
		}
		return all
	}
	var all bool
	if err := s.view(func(tx *bolt.Tx) error { all = read(tx.Bucket(bucketRoutes)); return nil }); err != nil || all {
		return got, err
	}
	if s.readOnly {
		return nil, ErrReadOnly
	}
	err := closedErr(s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketRoutes)
		if err != nil {
			return err
		}
		for name, d := range want {
			if b.Get([]byte(name)) == nil {
				if err := b.Put([]byte(name), d); err != nil {
					return err
				}
			}
		}
		read(b)
		return nil
	}))
	return got, err
}

var _ engine.RouteRecords = (*Store)(nil)

// RecordedRoutes returns the key derivation recorded for each of names
// that has one, reading only: also on a store opened read-only.
func (s *Store) RecordedRoutes(ctx context.Context, names []string) (map[string][]byte, error) {
	got := make(map[string][]byte, len(names))
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRoutes)
		for _, name := range names {
			if b == nil {
				break
			}
			if v := b.Get([]byte(name)); v != nil {
				got[name] = bytes.Clone(v)
			}
		}
		return nil
	})
	return got, err
}
