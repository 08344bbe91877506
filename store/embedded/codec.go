package embedded

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// The layout, one bucket per table (schemaVersion 4; 3 held no row of format
// 5, 2 no row of format 4 and no audit record of format 3):
//
//	audit       big-endian position of the chunk's first record ->
//	            a chunk of consecutive records of one batch, see auditcodec.go
//	keys        big-endian ordinal of the chunk's first entry when written ->
//	            a chunk of up to chunkEntries consecutive entries of one batch,
//	            each big-endian ordinal (8) | key (32) | digest (32) | big-endian unix nanos (8)
//	sources     engine.SourceID     -> SourceState row (SourceState.AppendBinary)
//	entities    name                -> EntityState row (EntityState.AppendBinary)
//	quarantine  big-endian id       -> uvarint n | n bytes of entry JSON without payload | raw payload
//	meta        "version" -> big-endian schemaVersion
//	            "head"    -> big-endian position (8) | hash (32)
//	            "nextkey" -> big-endian ordinal
//	            "base"    -> big-endian position (8) | hash (32) of the last
//	                         record audit retention dropped (see trim.go)
//	            "rows"    -> big-endian number of sources (8) | of entities (8)
//	outbox, outboxheld   the outbox, see outbox.go
//	cursors              audit sinks' cursors, see cursor.go
//	routes               each route's key derivation, see routes.go
//	rowlog               rows written since the last merge, see rowlog.go
var (
	bucketAudit      = []byte("audit")
	bucketKeys       = []byte("keys")
	bucketSources    = []byte("sources")
	bucketEntities   = []byte("entities")
	bucketQuarantine = []byte("quarantine")
	bucketMeta       = []byte("meta")
	allBuckets       = [][]byte{bucketAudit, bucketKeys, bucketSources, bucketEntities, bucketQuarantine, bucketMeta, bucketRowLog}

	keyVersion = []byte("version")
	keyHead    = []byte("head")
	keyNextKey = []byte("nextkey")
	keyRows    = []byte("rows")
)

const keyEntrySize = 8 + 32 + 32 + 8

// chunkEntries bounds a key chunk to one 4 KiB page, so that evicting part of
// a chunk rewrites a page, not a batch's worth of entries, and Load and
// eviction touch one bbolt item per 48 entries.
const chunkEntries = 48

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), n) }

func appendKeyEntry(dst []byte, e engine.KeyEntry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, e.Ordinal)
	dst = append(dst, e.Key[:]...)
	dst = append(dst, e.Digest[:]...)
	return binary.BigEndian.AppendUint64(dst, uint64(e.Time))
}

// decodeChunk appends the entries of a key chunk to dst.
func decodeChunk(dst []engine.KeyEntry, k, v []byte) ([]engine.KeyEntry, error) {
	if len(k) != 8 || len(v)%keyEntrySize != 0 {
		return dst, fmt.Errorf("embedded: corrupt key chunk %x", k)
	}
	for ; len(v) > 0; v = v[keyEntrySize:] {
		e := engine.KeyEntry{Ordinal: chunkOrdinal(v, 0), Time: int64(binary.BigEndian.Uint64(v[72:]))}
		copy(e.Key[:], v[8:40])
		copy(e.Digest[:], v[40:72])
		dst = append(dst, e)
	}
	return dst, nil
}

// chunkOrdinal returns the ordinal of entry i of a chunk.
func chunkOrdinal(v []byte, i int) uint64 {
	return binary.BigEndian.Uint64(v[i*keyEntrySize:])
}

// windowSize is the number of key entries to expect from the first stored
// chunk and the next ordinal to assign: ordinals are dense.
func windowSize(first []byte, next uint64) uint64 {
	if len(first) < keyEntrySize || next <= chunkOrdinal(first, 0) {
		return 0
	}
	return min(next-chunkOrdinal(first, 0), 1<<22)
}

func encodeHead(h engine.AuditHead) []byte {
	return append(u64(h.Position), h.Hash[:]...)
}

func readMeta(m *bolt.Bucket) (head engine.AuditHead, nextKey uint64, err error) {
	if v := m.Get(keyHead); v != nil {
		if len(v) != 8+len(head.Hash) {
			return head, 0, fmt.Errorf("embedded: corrupt audit head %x", v)
		}
		head.Position = binary.BigEndian.Uint64(v)
		copy(head.Hash[:], v[8:])
	}
	if v := m.Get(keyNextKey); v != nil {
		if len(v) != 8 {
			return head, 0, fmt.Errorf("embedded: corrupt next key %x", v)
		}
		nextKey = binary.BigEndian.Uint64(v)
	}
	return head, nextKey, nil
}

func encodeQuarantine(q engine.QuarantineEntry) ([]byte, error) {
	payload := q.Payload
	q.Payload = nil
	meta, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, binary.MaxVarintLen64+len(meta)+len(payload))
	out = binary.AppendUvarint(out, uint64(len(meta)))
	out = append(out, meta...)
	return append(out, payload...), nil
}

// decodeQuarantine decodes v, which bbolt owns: the payload is copied.
func decodeQuarantine(v []byte) (engine.QuarantineEntry, error) {
	var q engine.QuarantineEntry
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return q, fmt.Errorf("embedded: corrupt quarantine entry")
	}
	if err := json.Unmarshal(v[w:w+int(n)], &q); err != nil {
		return q, fmt.Errorf("embedded: corrupt quarantine entry: %w", err)
	}
	q.Payload = append([]byte(nil), v[w+int(n):]...)
	return q, nil
}

// row is a source's or an entity's state, which the store keeps in the
// engine's binary row encoding; rows a version 1 store wrote are JSON,
// which the same decoder reads.
type row[T any] interface {
	*T
	UnmarshalBinary([]byte) error
}

// decodeRow decodes the row v of key k in bucket name.
func decodeRow[T any, P row[T]](name, k, v []byte) (T, error) {
	var x T
	if err := P(&x).UnmarshalBinary(v); err != nil {
		return x, fmt.Errorf("embedded: corrupt value %q in %s: %w", k, name, err)
	}
	return x, nil
}

// decodeAll decodes every row of the bucket name, with those of the row
// log in v.
func decodeAll[T any, P row[T]](s *Store, tx *bolt.Tx, v *rowView, name []byte) ([]T, error) {
	var out []T
	err := s.forEachRow(tx.Bucket(name), v, kindOf(name), func(k, val []byte) error {
		x, err := decodeRow[T, P](name, k, val)
		out = append(out, x)
		return err
	})
	return out, err
}
