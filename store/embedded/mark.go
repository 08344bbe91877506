package embedded

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// bucketMarks holds the JetStream consumers' marks: name -> JSON of an
// engine.StreamMark. Created by the first SetStreamMark, so a store
// written before marks existed keeps its layout version.
var bucketMarks = []byte("stream_marks")

var _ engine.StreamMarks = (*Store)(nil)

// StreamMark returns the mark kept under name.
func (s *Store) StreamMark(ctx context.Context, name string) (engine.StreamMark, bool, error) {
	var m engine.StreamMark
	found := false
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMarks)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(name))
		if v == nil {
			return nil
		}
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("embedded: corrupt stream mark %q: %w", name, err)
		}
		found = true
		return nil
	})
	return m, found, err
}

// SetStreamMark keeps m under name in one small transaction, synced like
// a commit.
func (s *Store) SetStreamMark(ctx context.Context, name string, m engine.StreamMark) error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return closedErr(s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketMarks)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), v)
	}))
}
