package redis

import (
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/replayguard/replayguard/engine"
)

// argBufs keeps, between writes, the buffers that hold the key sets and
// audit records of batches being written: they are the bulk of a batch
// (about 0.7 MB for 1000 records), and go-redis is done with them once the
// script has answered. Unlike a sync.Pool, which the collector emptied
// every few batches, it keeps them, so a member does not allocate and zero
// them again. It lets go of a buffer a batch grew past maxKeptBuf. Its
// zero value keeps none.
type argBufs chan *[]byte

// maxKeptBuf bounds what argBufs keeps between writes: a batch of large
// records does not leave its buffer behind for good.
const maxKeptBuf = 8 << 20

func (f argBufs) get() *[]byte {
	select {
	case b := <-f:
		return b
	default:
		return new([]byte)
	}
}

func (f argBufs) put(b *[]byte) {
	if cap(*b) > maxKeptBuf {
		return
	}
	select {
	case f <- b:
	default:
	}
}

// scriptArgs lays b out as the update script's KEYS and ARGV (see
// updateSource); the key set and the audit records are in *buf.
func (s *Store) scriptArgs(b *engine.Batch, rd *read, buf *[]byte) ([]string, []any, error) {
	var setID, setMember string
	*buf, setID, setMember = keySet((*buf)[:0], b.Keys)
	set := (*buf)[:len(*buf):len(*buf)]
	lk := &locks{}
	if rd != nil {
		lk = rd.locks
	}
	ka, err := s.batchKeys(b, rd)
	if err != nil {
		return nil, nil, err
	}
	keys := make([]string, 0, 15+len(ka.names)+len(lk.names))
	keys = append(keys, s.k.lease(s.member), s.k.heads, s.k.chain(s.member), s.k.chainIndex(s.member),
		s.k.sourceVersions, s.k.sources, s.k.entityVersions, s.k.entities, s.k.quarantine, s.k.quarIDs,
		s.k.keyIndex, s.k.keyCount, s.k.keySetPrefix()+setID, s.k.quarHeld, s.k.quarHeldBy)
	keys = append(keys, ka.names...)
	first, head, audit, err := auditArgs(b.Audit, buf, len(set))
	if err != nil {
		return nil, nil, err
	}
	var srcChk, entChk []string
	if rd != nil {
		srcChk, entChk = pairs(rd.r.Sources, rd.sources), pairs(rd.r.Entities, rd.entities)
	}
	args := make([]any, 0, 23+len(ka.present)+len(srcChk)+len(entChk)+len(b.Keys)+
		2*len(b.Sources)+2*len(b.Entities)+3*len(b.Quarantine)+len(b.Resolved)+len(b.HeldOpen)+2) // the held index's last: heldArgs
	args = append(args, s.holder, s.member, first, head, len(ka.checked), len(srcChk)/2, len(entChk)/2,
		len(b.Keys), len(b.Sources), len(b.Entities), len(b.Audit), len(b.Quarantine), len(b.Resolved),
		s.opts.TTL.Milliseconds(), setMember, set, audit, ka.checked, ka.written, len(ka.present), lk.token, len(lk.names), s.k.unlocked)
	args = appendStrings(args, ka.present, srcChk, entChk)
	for _, v := range ka.values {
		if v != "" { // the keys written
			args = append(args, v)
		}
	}
	if args, err = appendRowArgs(args, b); err != nil {
		return nil, nil, err
	}
	keys, args, err = s.outboxArgs(b, keys, args)
	if err != nil {
		return nil, nil, err
	}
	return append(keys, lk.names...), heldArgs(args, b, rd != nil), nil
}

// keyArgs are a batch's idempotency keys as the update script takes them.
type keyArgs struct {
	names   []string // in KEYS: those read, then the batch's keys that were not
	checked []byte   // per checked name: '1' read present (its value in present), '0' absent
	present []string // the values read
	written []byte   // per name: '1' when the batch writes it
	values  []string // per name: the value written, "" when none
}

// batchKeys lays out b's keys and the keys rd read (nil: Commit, which
// checks none). A batch key that was read live (applied after the cutoff)
// is refused: the batch was decided on a key it would overwrite.
func (s *Store) batchKeys(b *engine.Batch, rd *read) (keyArgs, error) {
	var ka keyArgs
	if rd == nil {
		for i := range b.Keys {
			ka.names = append(ka.names, s.k.key(b.Keys[i].Key))
			ka.values = append(ka.values, encodeKeyValue(&b.Keys[i]))
		}
		ka.written = writtenBytes(ka.values)
		return ka, nil
	}
	ka.names = slices.Clone(rd.names)
	ka.checked = make([]byte, len(rd.keys), len(rd.keys)+len(b.Keys))
	for i, v := range rd.keys {
		ka.checked[i] = '0'
		if v != "" {
			ka.checked[i] = '1'
			ka.present = append(ka.present, v)
		}
	}
	ka.values = make([]string, len(rd.keys), len(rd.keys)+len(b.Keys))
	for i := range b.Keys {
		j, ok := slices.BinarySearchFunc(rd.r.Keys, b.Keys[i].Key, func(a, b engine.Hash) int { return bytes.Compare(a[:], b[:]) })
		if !ok {
			ka.names = append(ka.names, s.k.key(b.Keys[i].Key))
			ka.checked = append(ka.checked, '0')
			j = len(ka.values)
			ka.values = append(ka.values, "")
		} else if live(rd.keys[j], rd.r.KeyCutoff) {
			return keyArgs{}, fmt.Errorf("redis store: the batch overwrites key %s, live when read (applied after the cutoff)", b.Keys[i].Key)
		}
		ka.values[j] = encodeKeyValue(&b.Keys[i])
	}
	ka.written = writtenBytes(ka.values)
	return ka, nil
}

// writtenBytes is '1' for each value written, '0' for each "".
func writtenBytes(values []string) []byte {
	out := make([]byte, len(values))
	for i, v := range values {
		out[i] = '0'
		if v != "" {
			out[i] = '1'
		}
	}
	return out
}

// auditArgs encodes recs after the key set's setLen bytes of *buf, and
// returns the first position (0 when there is none), the chain head after
// them and the encoded records.
func auditArgs(recs []engine.AuditRecord, buf *[]byte, setLen int) (first uint64, head string, audit []byte, err error) {
	n := len(recs)
	if n == 0 {
		return 0, "", nil, nil
	}
	head = encodeHead(engine.AuditHead{Position: recs[n-1].Position, Hash: recs[n-1].Hash})
	if *buf, err = appendRecords(*buf, recs); err != nil {
		return 0, "", nil, err
	}
	return recs[0].Position, head, (*buf)[setLen:], nil
}

// appendStrings appends every string of each list, in order.
func appendStrings(args []any, lists ...[]string) []any {
	for _, l := range lists {
		for _, v := range l {
			args = append(args, v)
		}
	}
	return args
}

// appendRowArgs appends (id, row) of each source, (name, row) of each
// entity (engine's binary rows) and (hex id, JSON) of each quarantine entry b writes, then the
// hex id of each entry it resolves.
func appendRowArgs(args []any, b *engine.Batch) ([]any, error) {
	for i := range b.Sources {
		j, err := b.Sources[i].MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("redis store: encode source: %w", err)
		}
		args = append(args, b.Sources[i].ID(), j)
	}
	for i := range b.Entities {
		j, err := b.Entities[i].MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("redis store: encode entity %q: %w", b.Entities[i].Name, err)
		}
		args = append(args, b.Entities[i].Name, j)
	}
	for i := range b.Quarantine {
		j, err := json.Marshal(&b.Quarantine[i])
		if err != nil {
			return nil, fmt.Errorf("redis store: encode quarantine entry %d: %w", b.Quarantine[i].ID, err)
		}
		args = append(args, quarantineID(b.Quarantine[i].ID), j)
	}
	for _, id := range b.Resolved {
		args = append(args, quarantineID(id))
	}
	return args, nil
}

// appendRecords encodes recs one JSON a line (the JSON of a record holds no
// newline).
func appendRecords(out []byte, recs []engine.AuditRecord) ([]byte, error) {
	out = slices.Grow(out, 640*len(recs))
	start := len(out)
	for i := range recs {
		var err error
		if len(out) > start {
			out = append(out, '\n')
		}
		if out, err = engine.AppendRecordJSON(out, &recs[i]); err != nil {
			return nil, fmt.Errorf("redis store: encode audit record %d: %w", recs[i].Position, err)
		}
	}
	return out, nil
}

// keySet appends the batch's key set (each key's 32 bytes and ordinal) to
// set and returns it with its random id and member of the key index: the
// lowest ordinal, the id and the number of keys.
func keySet(set []byte, ks []engine.KeyEntry) (_ []byte, id, member string) {
	var nonce [8]byte
	_, _ = crand.Read(nonce[:])
	id = hex.EncodeToString(nonce[:])
	low := uint64(0)
	set = slices.Grow(set, 40*len(ks))
	for i := range ks {
		if i == 0 || ks[i].Ordinal < low {
			low = ks[i].Ordinal
		}
		set = append(set, ks[i].Key[:]...)
		set = binary.BigEndian.AppendUint64(set, ks[i].Ordinal)
	}
	m := binary.BigEndian.AppendUint64(nil, low)
	m = append(m, id...)
	m = append(m, ':')
	m = strconv.AppendInt(m, int64(len(ks)), 10)
	return set, id, string(m)
}

// live reports whether a stored key value was applied at or after cutoff.
func live(v string, cutoff int64) bool {
	return len(v) == keyValueLen && int64(binary.BigEndian.Uint64([]byte(v[32:40]))) >= cutoff
}

// pairs interleaves ids and their versions.
func pairs(ids, versions []string) []string {
	out := make([]string, 0, 2*len(ids))
	for i := range ids {
		out = append(out, ids[i], versions[i])
	}
	return out
}
