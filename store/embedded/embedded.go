package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/replayguard/replayguard/engine"
)

// FileName is the database file inside the store directory.
const FileName = "replayguard.db"

// lockTimeout bounds how long Open waits for another process to release the
// directory before it fails with engine.ErrLocked.
const lockTimeout = time.Second

// schemaVersion is the layout of the buckets described in codec.go. Open
// refuses a store written with a newer layout. Version 1 kept source and
// entity rows as JSON, which the row decoder still reads; version 2 kept
// them binary, of row formats 1 to 3; version 3 may hold rows of format 4
// (engine/rowcodec.go) and audit records of format 3 (a connection's first
// delivery, see auditcodec.go), which a build of version 2 cannot read;
// version 4 source rows of format 5 (a Sparkplug edge's session, binary,
// each alias table once), which a build of version 3 cannot read;
// version 5 every open quarantine entry with a key in the held index
// (those held before it indexed at the raise, heldSince), which a build
// of version 4 would hold entries outside of; version 6 source and entity
// rows in the row log (rowLogSince), which a build of version 5 would not
// read. A writer raises an older store to this version (and rewrites each
// row when it next writes it), and a reader reads it as it is. A build of
// an older version refuses a store raised, at open, rather than stop at
// the first row or record it cannot read.
const schemaVersion = rowLogSince

// ErrReadOnly is returned by Commit on a store opened with Options.ReadOnly.
var ErrReadOnly = errors.New("embedded: store opened read-only")

// Options configure Open. The zero value opens the store for writing,
// durably, without logging.
type Options struct {
	// ReadOnly opens an existing store for reading: Commit returns
	// ErrReadOnly. Any number of read-only opens may share a directory, but
	// not with a writer: while one holds it, Open fails with
	// engine.ErrLocked, and the other way round. Default false.
	ReadOnly bool
	// Logger receives open and close events. Default: discard.
	Logger *slog.Logger
	// NoSync skips the fsync of each commit, so a crash may lose or tear
	// recent batches. For benchmarks and bulk test fixtures only. Default
	// false.
	NoSync bool
}

// Store is an engine.Store in one local directory. Create it with Open.
type Store struct {
	db       *bolt.DB
	path     string
	readOnly bool
	log      *slog.Logger
	closed   atomic.Bool
	rows     *rowLog    // the row log's rows
	commitMu sync.Mutex // held by Commit from its transaction to s.rows taking it in
	// drainSliced, when set (tests), is called after each transaction
	// of a drain.
	drainSliced func()
	// readBegins, when set (tests), is called by ReadRows before it
	// begins its transaction.
	readBegins func()
	// filterBuilt, when set (tests), is called by a filter's builder
	// once its scans are done, before the filter goes into use.
	filterBuilt func()
	prefetching sync.WaitGroup // prefetch's
	filters     rowFilters     // of the keys of the sources' and entities' trees
	filtering   sync.WaitGroup // the filters' builders
}

var (
	_ engine.Store             = (*Store)(nil)
	_ engine.AuditScanner      = (*Store)(nil)
	_ engine.QuarantineScanner = (*Store)(nil)
)

// Capabilities declares a single-owner store with audit retention, sink
// cursors, an outbox, and rows read one at a time.
func (s *Store) Capabilities() engine.Capabilities {
	return engine.Capabilities{Trim: s, Cursors: s, Outbox: s, Rows: s, Routes: s, Marks: s, Held: s}
}

// Open opens the store in dir, creating the directory and the store when
// they do not exist (unless opts.ReadOnly). When another process holds the
// directory, Open fails with an error wrapping engine.ErrLocked after about
// a second.
func Open(dir string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	path := filepath.Join(dir, FileName)
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("embedded: open read-only: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	db, err := openFile(path, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, readOnly: opts.ReadOnly, log: log}
	if err := s.init(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.prefetch()
	if err := s.view(func(tx *bolt.Tx) (err error) { s.rows, err = loadRowLog(tx); return err }); err != nil {
		s.closed.Store(true)
		s.prefetching.Wait()
		_ = db.Close()
		if !errors.Is(err, ErrDamaged) { // a chunk that does not decode
			err = damaged(path, err)
		}
		return nil, err
	}
	if !opts.ReadOnly {
		s.startFilters()
	}
	log.Debug("store opened", "path", path, "read_only", opts.ReadOnly, "no_sync", opts.NoSync)
	if opts.NoSync {
		log.Warn("store commits are not synced: a crash may lose recent decisions", "path", path)
	}
	return s, nil
}

// openFile opens the bbolt file at path. A file this call created and
// could not write (the disk full) is removed again: it never held a
// commit, and left there it would be refused as cut short once the disk
// has room. A file whose pages do not read as bbolt's is ErrDamaged.
func openFile(path string, opts Options) (*bolt.DB, error) {
	_, statErr := os.Stat(path)
	db, err := openBolt(path, opts)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s", engine.ErrLocked, path)
	case errors.Is(statErr, fs.ErrNotExist) && !opts.ReadOnly:
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, fmt.Errorf("embedded: create %s: %w (and removing the file it left: %v)", path, err, rerr)
		}
		return nil, fmt.Errorf("embedded: create %s: %w (nothing kept: start again once it is fixed)", path, err)
	case errors.Is(err, ErrDamaged):
		return nil, err
	case isDamagedAtOpen(err):
		return nil, damaged(path, err)
	}
	return nil, fmt.Errorf("embedded: open %s: %w", path, err)
}

// openBolt opens the bbolt file; a page that does not read as bbolt's
// (bbolt panics on some) is ErrDamaged.
func openBolt(path string, opts Options) (db *bolt.DB, err error) {
	defer recoverDamaged(path, &err, guard())
	return bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      lockTimeout,
		ReadOnly:     opts.ReadOnly,
		NoSync:       opts.NoSync,
		FreelistType: bolt.FreelistMapType,
	})
}

// init creates the buckets of a new store and checks the layout of an old one.
func (s *Store) init() error {
	check := func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if m == nil {
			return fmt.Errorf("embedded: %s is not an initialised store", s.path)
		}
		v := m.Get(keyVersion)
		switch {
		case len(v) != 8 || binary.BigEndian.Uint64(v) == 0:
			return fmt.Errorf("embedded: %s has an unknown layout (version %x, want %d)", s.path, v, schemaVersion)
		case binary.BigEndian.Uint64(v) > schemaVersion:
			return fmt.Errorf("embedded: %s has layout %d, newer than this build's %d: upgrade replayguard", s.path, binary.BigEndian.Uint64(v), schemaVersion)
		}
		return nil
	}
	if s.readOnly {
		return s.view(check)
	}
	return s.update(func(tx *bolt.Tx) error {
		version := binary.BigEndian.AppendUint64(nil, schemaVersion)
		if tx.Bucket(bucketMeta) == nil {
			for _, name := range allBuckets {
				if _, err := tx.CreateBucket(name); err != nil {
					return fmt.Errorf("embedded: create bucket %s: %w", name, err)
				}
			}
			if err := tx.Bucket(bucketMeta).Put(keyVersion, version); err != nil {
				return err
			}
		}
		if err := check(tx); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketRowLog); err != nil { // a store from before it
			return err
		}
		m := tx.Bucket(bucketMeta)
		if m.Get(keyRows) == nil { // a new store, or one of version 1
			if err := m.Put(keyRows, countRows(tx).encode()); err != nil {
				return err
			}
		}
		if binary.BigEndian.Uint64(m.Get(keyVersion)) < heldSince {
			if err := backfillHeld(tx); err != nil {
				return err
			}
		}
		if !bytes.Equal(m.Get(keyVersion), version) {
			s.log.Info("store layout raised", "path", s.path, "from", binary.BigEndian.Uint64(m.Get(keyVersion)), "to", schemaVersion)
			return m.Put(keyVersion, version)
		}
		return nil
	})
}

// Close releases the directory. Close waits for running reads and commits;
// every later call returns engine.ErrClosed. A writable store first
// writes the row log's rows into their trees (drain), so that the next
// Open reads none back; when that fails the rows stay in the log, and
// Close still releases the directory.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return engine.ErrClosed
	}
	s.stopFilters()
	s.prefetching.Wait()
	var drained error
	if !s.readOnly {
		drained = s.drainAtClose()
	}
	s.filtering.Wait() // after the drain, whose puts start no builder once closed
	err := s.db.Close()
	switch {
	case drained != nil:
		return fmt.Errorf("embedded: close: write the row log into its trees (its rows stay in the log, read back at the next open): %w", errors.Join(drained, err))
	case err != nil:
		return fmt.Errorf("embedded: close: %w", err)
	}
	s.log.Debug("store closed", "path", s.path)
	return nil
}

// drainAtClose writes the row log's rows into their trees (drain) once
// the last commit is in, and logs how many and how long it took.
func (s *Store) drainAtClose() error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	start, rows := time.Now(), s.rows.unmerged()
	if rows == 0 {
		return nil
	}
	err := s.drain()
	if err == nil {
		s.log.Info("row log written into its trees at close", "path", s.path, "rows", rows, "took", time.Since(start).Round(time.Millisecond))
	}
	return err
}

// view runs fn in a read transaction; a damaged page it meets is
// ErrDamaged.
func (s *Store) view(fn func(tx *bolt.Tx) error) (err error) {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	defer recoverDamaged(s.path, &err, guard())
	return closedErr(s.db.View(fn))
}

// update runs fn in a write transaction; a damaged page it meets is
// ErrDamaged, and nothing of fn is committed.
func (s *Store) update(fn func(tx *bolt.Tx) error) (err error) {
	defer recoverDamaged(s.path, &err, guard())
	return s.db.Update(fn)
}

// closedErr reports a transaction that lost a race with Close as ErrClosed.
func closedErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return engine.ErrClosed
	}
	return err
}

// Load reads the key window, every source and entity, and the chain head.
func (s *Store) Load(ctx context.Context) (*engine.Snapshot, error) {
	return s.load(ctx, true, true)
}

// AuditHead reads the chain head alone, without the key window, sources
// and entities Load decodes: what a command that verifies or reports the
// audit log needs of the state.
func (s *Store) AuditHead(ctx context.Context) (engine.AuditHead, error) {
	snap, err := s.load(ctx, false, false)
	if err != nil {
		return engine.AuditHead{}, err
	}
	return snap.AuditHead, nil
}

// LoadKeys reads the key window and the chain head: the engine reads the
// sources and entities its batches touch with ReadRows.
func (s *Store) LoadKeys(ctx context.Context) (*engine.Snapshot, error) {
	return s.load(ctx, true, false)
}

// ScanSources decodes the source windows one at a time, in one read, and
// calls fn with each; it looks at ctx every scanCheckEvery rows.
func (s *Store) ScanSources(ctx context.Context, fn func(engine.SourceState) error) error {
	return scanRows(s, ctx, bucketSources, fn)
}

// ScanEntities is ScanSources of the entities, keyed, and so read, by
// name.
func (s *Store) ScanEntities(ctx context.Context, fn func(engine.EntityState) error) error {
	return scanRows(s, ctx, bucketEntities, fn)
}

// scanRows decodes the rows of the bucket name one at a time, in one
// read, and calls fn with each.
func scanRows[T any, P row[T]](s *Store, ctx context.Context, name []byte, fn func(T) error) error {
	return s.withRows(func(tx *bolt.Tx, v *rowView) error {
		n := 0
		return s.forEachRow(tx.Bucket(name), v, kindOf(name), func(k, val []byte) error {
			if n++; n%scanCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			x, err := decodeRow[T, P](name, k, val)
			if err != nil {
				return err
			}
			return fn(x)
		})
	})
}

// scanCheckEvery is how many rows ScanSources decodes between two looks
// at its context.
const scanCheckEvery = 1024

func (s *Store) load(ctx context.Context, keys, rows bool) (*engine.Snapshot, error) {
	snap := &engine.Snapshot{}
	err := s.withRows(func(tx *bolt.Tx, v *rowView) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		if snap.AuditHead, snap.NextKey, err = readMeta(tx.Bucket(bucketMeta)); err != nil {
			return err
		}
		if keys {
			c := tx.Bucket(bucketKeys).Cursor()
			k, v := c.First()
			snap.Keys = make([]engine.KeyEntry, 0, windowSize(v, snap.NextKey))
			for ; k != nil; k, v = c.Next() {
				if snap.Keys, err = decodeChunk(snap.Keys, k, v); err != nil {
					return err
				}
			}
		}
		if !rows {
			return nil
		}
		if snap.Sources, err = decodeAll[engine.SourceState](s, tx, v, bucketSources); err != nil {
			return err
		}
		snap.Entities, err = decodeAll[engine.EntityState](s, tx, v, bucketEntities)
		return err
	})
	if err != nil {
		return nil, err
	}
	return snap, nil
}
