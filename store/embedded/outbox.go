package embedded

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/replayguard/replayguard/engine"
)

// The outbox, in buckets created by the first batch that has entries, so
// a store written before the outbox existed keeps its layout version:
//
//	outbox      big-endian id -> uvarint n | n bytes of entry meta | raw payload, the meta
//	            outboxFormat and the entry's fields (appendOutboxEntry), or, written
//	            before it, the entry's JSON without payload (still read)
//	outboxheld  big-endian id -> uvarint n | n bytes of HeldEntry JSON without payload | raw payload
//	meta        "outboxdepth" -> big-endian count of the outbox's entries
var (
	bucketOutbox     = []byte("outbox")
	bucketOutboxHeld = []byte("outboxheld")
	keyOutboxDepth   = []byte("outboxdepth")
)

var _ engine.OutboxStore = (*Store)(nil)

// encodeOutbox checks and encodes a batch's outbox entries, before the
// write transaction starts.
func encodeOutbox(b *engine.Batch) ([][]byte, error) {
	if len(b.Outbox) == 0 && len(b.OutboxHeld) == 0 && len(b.OutboxResolved) == 0 {
		return nil, nil
	}
	if err := engine.CheckOutbox(b); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	for _, h := range b.OutboxHeld {
		if h.Member != "" {
			return nil, fmt.Errorf("embedded: a hold of outbox entry %d names member %q: this store keeps one outbox, member \"\"", h.ID, h.Member)
		}
	}
	for _, r := range b.OutboxResolved {
		if r.Member != "" {
			return nil, fmt.Errorf("embedded: a resolution of outbox entry %d names member %q: this store keeps one outbox, member \"\"", r.ID, r.Member)
		}
	}
	out := make([][]byte, len(b.Outbox))
	for i := range b.Outbox {
		out[i] = appendOutboxEntry(nil, &b.Outbox[i])
	}
	return out, nil
}

// outboxFormat is the first byte of an entry's binary meta: never '{', the
// first byte of the JSON meta written before it. Deciding a message with
// a forward effect encodes its entry and draining the outbox decodes it:
// 4.7-4.9 µs an entry as JSON, 0.7 µs so (BenchmarkOutboxEntry).
const outboxFormat = 1

// appendOutboxEntry appends e as an outbox value: its meta, length first,
// then its payload.
func appendOutboxEntry(dst []byte, e *engine.OutboxEntry) []byte {
	meta := make([]byte, 0, 96+len(e.Target)+len(e.Topic))
	meta = append(meta, outboxFormat)
	meta = binary.AppendUvarint(meta, e.ID)
	meta = appendString(meta, e.Output)
	meta = appendString(meta, e.Target)
	meta = appendString(meta, e.Route)
	meta = appendString(meta, e.Topic)
	meta = binary.AppendUvarint(meta, uint64(len(e.Source)))
	for _, p := range e.Source {
		meta = appendString(meta, p)
	}
	meta = append(meta, e.Key[:]...)
	meta = appendString(meta, e.Epoch)
	meta = binary.AppendVarint(meta, e.Sequence)
	t, err := e.Time.MarshalBinary()
	if err != nil { // an offset of seconds: the instant, in UTC
		t, _ = e.Time.UTC().MarshalBinary()
	}
	meta = appendBytes(meta, t)
	dst = slices.Grow(dst, binary.MaxVarintLen64+len(meta)+len(e.Payload))
	dst = appendBytes(dst, meta)
	return append(dst, e.Payload...)
}

// decodeOutboxEntry decodes v, which bbolt owns, into a pending entry
// whose payload is a copy.
func decodeOutboxEntry(v []byte) (engine.OutboxEntry, error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return engine.OutboxEntry{}, fmt.Errorf("embedded: corrupt outbox entry")
	}
	meta := v[w : w+int(n)]
	if len(meta) == 0 || meta[0] != outboxFormat {
		var e engine.OutboxEntry
		p, err := decodeOutboxValue(v, &e)
		e.Payload = p
		return e, err
	}
	d := decoder{b: meta[1:]}
	e := engine.OutboxEntry{ID: d.uvarint(), Output: d.str(), Target: d.str(), Route: d.str(), Topic: d.str()}
	if k := d.uvarint(); k > 0 && k <= uint64(len(d.b)) {
		e.Source = make([]string, k)
		for i := range e.Source {
			e.Source[i] = d.str()
		}
	} else if k > 0 {
		d.fail()
	}
	copy(e.Key[:], d.raw(len(e.Key)))
	e.Epoch, e.Sequence = d.str(), d.varint()
	if t := d.bytes(); d.err == nil && e.Time.UnmarshalBinary(t) != nil {
		d.fail()
	}
	if d.err != nil || len(d.b) > 0 {
		return engine.OutboxEntry{}, fmt.Errorf("embedded: corrupt outbox entry %d", e.ID)
	}
	e.Payload = append([]byte(nil), v[w+int(n):]...)
	return e, nil
}

// appendOutboxValue appends v's JSON, length first, then payload.
func appendOutboxValue(dst []byte, v any, payload []byte) ([]byte, error) {
	meta, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dst = slices.Grow(dst, binary.MaxVarintLen64+len(meta)+len(payload))
	dst = binary.AppendUvarint(dst, uint64(len(meta)))
	dst = append(dst, meta...)
	return append(dst, payload...), nil
}

// decodeOutboxValue decodes v, which bbolt owns, into x and returns a copy
// of its payload.
func decodeOutboxValue(v []byte, x any) ([]byte, error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n {
		return nil, fmt.Errorf("embedded: corrupt outbox entry")
	}
	if err := json.Unmarshal(v[w:w+int(n)], x); err != nil {
		return nil, fmt.Errorf("embedded: corrupt outbox entry: %w", err)
	}
	return append([]byte(nil), v[w+int(n):]...), nil
}

// putOutbox applies the batch's resolutions, adds its entries and moves
// the held ones, counting the outbox's depth.
func putOutbox(tx *bolt.Tx, b *engine.Batch, enc [][]byte) error {
	if len(b.Outbox) == 0 && len(b.OutboxHeld) == 0 && len(b.OutboxResolved) == 0 {
		return nil
	}
	ob, err := tx.CreateBucketIfNotExists(bucketOutbox)
	if err != nil {
		return err
	}
	requeued := 0
	for _, r := range b.OutboxResolved {
		if err := resolve(ob, tx.Bucket(bucketOutboxHeld), r); err != nil {
			return err
		}
		if r.Requeue {
			requeued++
		}
	}
	ob.FillPercent = 1 // IDs ascend: pack pages full
	for i, e := range b.Outbox {
		if err := ob.Put(u64(e.ID), enc[i]); err != nil {
			return err
		}
	}
	moved := 0
	if len(b.OutboxHeld) > 0 {
		hb, err := tx.CreateBucketIfNotExists(bucketOutboxHeld)
		if err != nil {
			return err
		}
		for _, h := range b.OutboxHeld {
			ok, err := hold(ob, hb, h)
			if err != nil {
				return err
			}
			if ok {
				moved++
			}
		}
	}
	return addDepth(tx.Bucket(bucketMeta), requeued+len(b.Outbox)-moved)
}

// resolve takes held entry r.ID out of hb (nil when nothing was ever
// held), back into ob with the bytes it was written with when r.Requeue.
// An entry that is not held fails the batch with engine.ErrNotFound.
func resolve(ob, hb *bolt.Bucket, r engine.OutboxResolve) error {
	k := u64(r.ID)
	var v []byte
	if hb != nil {
		v = hb.Get(k)
	}
	if v == nil {
		return fmt.Errorf("%w: outbox entry %d is not held; nothing written", engine.ErrNotFound, r.ID)
	}
	if r.Requeue {
		var he engine.HeldEntry
		payload, err := decodeOutboxValue(v, &he)
		if err != nil {
			return err
		}
		he.Payload = payload
		if err := ob.Put(k, appendOutboxEntry(nil, &he.OutboxEntry)); err != nil {
			return err
		}
	}
	return hb.Delete(k)
}

// hold moves entry h.ID to the held bucket, reporting whether it was
// pending. An operator's hold (Pending) of an entry no longer pending fails
// the batch with engine.ErrNotFound.
func hold(ob, hb *bolt.Bucket, h engine.OutboxHold) (bool, error) {
	k := u64(h.ID)
	v := ob.Get(k)
	if v == nil && h.Pending {
		return false, fmt.Errorf("%w: outbox entry %d is no longer pending (delivered meanwhile); nothing written", engine.ErrNotFound, h.ID)
	}
	if v == nil {
		return false, nil
	}
	e, err := decodeOutboxEntry(v)
	if err != nil {
		return false, err
	}
	payload := e.Payload
	e.Payload = nil
	hv, err := appendOutboxValue(nil, engine.HeldEntry{OutboxEntry: e, Reason: h.Reason}, payload)
	if err != nil {
		return false, fmt.Errorf("embedded: encode held outbox entry %d: %w", h.ID, err)
	}
	if err := hb.Put(k, hv); err != nil {
		return false, err
	}
	return true, ob.Delete(k)
}

// addDepth adds n (which may be negative) to the stored depth.
func addDepth(meta *bolt.Bucket, n int) error {
	if n == 0 {
		return nil
	}
	d := int64(readDepth(meta)) + int64(n)
	if d < 0 {
		return fmt.Errorf("embedded: outbox depth would be %d", d)
	}
	return meta.Put(keyOutboxDepth, u64(uint64(d)))
}

func readDepth(meta *bolt.Bucket) uint64 {
	if v := meta.Get(keyOutboxDepth); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// singleOwner refuses a member other than "".
func singleOwner(member string) error {
	if member != "" {
		return fmt.Errorf("embedded: outbox of member %q: this store keeps one outbox, member \"\"", member)
	}
	return nil
}

// Outbox returns up to limit pending entries with ID > after, in ID
// order; member must be "".
func (s *Store) Outbox(ctx context.Context, member string, after uint64, limit int) ([]engine.OutboxEntry, error) {
	if err := singleOwner(member); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("embedded: outbox limit %d is below 1", limit)
	}
	var out []engine.OutboxEntry
	err := s.view(func(tx *bolt.Tx) error {
		ob := tx.Bucket(bucketOutbox)
		if ob == nil || after == ^uint64(0) {
			return nil
		}
		c := ob.Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			e, err := decodeOutboxEntry(v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// OutboxDone removes delivered entries in one synced transaction; IDs no
// longer pending are ignored.
func (s *Store) OutboxDone(ctx context.Context, member string, ids []uint64) error {
	if err := singleOwner(member); err != nil {
		return err
	}
	if s.closed.Load() {
		return engine.ErrClosed
	}
	if s.readOnly {
		return ErrReadOnly
	}
	if len(ids) == 0 {
		return nil
	}
	return closedErr(s.update(func(tx *bolt.Tx) error {
		ob := tx.Bucket(bucketOutbox)
		if ob == nil {
			return nil
		}
		n := 0
		for _, id := range ids {
			k := u64(id)
			if ob.Get(k) == nil {
				continue
			}
			if err := ob.Delete(k); err != nil {
				return err
			}
			n++
		}
		return addDepth(tx.Bucket(bucketMeta), -n)
	}))
}

// OutboxDepth counts the pending entries; member must be "".
func (s *Store) OutboxDepth(ctx context.Context, member string) (int, error) {
	if err := singleOwner(member); err != nil {
		return 0, err
	}
	var n uint64
	err := s.view(func(tx *bolt.Tx) error {
		n = readDepth(tx.Bucket(bucketMeta))
		return nil
	})
	return int(n), err
}

// OutboxHeld returns the held entries in ID order.
func (s *Store) OutboxHeld(ctx context.Context) ([]engine.HeldEntry, error) {
	var out []engine.HeldEntry
	err := s.view(func(tx *bolt.Tx) error {
		hb := tx.Bucket(bucketOutboxHeld)
		if hb == nil {
			return nil
		}
		return hb.ForEach(func(_, v []byte) error {
			var h engine.HeldEntry
			p, err := decodeOutboxValue(v, &h)
			if err != nil {
				return err
			}
			h.Payload = p
			out = append(out, h)
			return nil
		})
	})
	return out, err
}
