package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
)

// Scans read in chunks (scanChunk entries, chainBatches batches of records),
// one command each, and call fn between commands: a slow reader holds nothing on the server, and fn may use the
// store. Records and entries written while a scan runs may be included.
const scanChunk = 500

// Load returns the group's sources and entities and this member's chain
// head (zero on a read-only handle). Keys are left empty: the group's keys
// are read per batch by Update.
func (s *Store) Load(ctx context.Context) (*engine.Snapshot, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	snap := &engine.Snapshot{}
	var err error
	if snap.Sources, err = scanHash[engine.SourceState](ctx, s, s.k.sources); err != nil {
		return nil, err
	}
	if snap.Entities, err = scanHash[engine.EntityState](ctx, s, s.k.entities); err != nil {
		return nil, err
	}
	if snap.AuditHead, err = s.Head(ctx); err != nil {
		return nil, err
	}
	return snap, nil
}

// scanHash decodes every value of a hash of rows, HSCAN by HSCAN.
func scanHash[T any, P row[T]](ctx context.Context, s *Store, key string) ([]T, error) {
	var out []T
	var cursor uint64
	for {
		kv, next, err := s.c.HScan(ctx, key, cursor, "", scanChunk).Result()
		if err != nil {
			return nil, s.fail("read "+key, err)
		}
		for i := 1; i < len(kv); i += 2 {
			var v T
			if err := P(&v).UnmarshalBinary([]byte(kv[i])); err != nil {
				return nil, fmt.Errorf("redis store: %s field %q: %w", key, kv[i-1], err)
			}
			out = append(out, v)
		}
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// ScanSources calls fn for each of the group's source windows, in id
// order. A hash scan may return a field twice, so the ids are read first
// (the memory this takes grows with the ids only), then the windows a
// chunk at a time; one deleted meanwhile is left out, one written
// meanwhile may be read in its new state.
func (s *Store) ScanSources(ctx context.Context, fn func(engine.SourceState) error) error {
	return scanRows(ctx, s, s.k.sources, fn)
}

// ScanEntities is ScanSources of the group's entities, in name order.
func (s *Store) ScanEntities(ctx context.Context, fn func(engine.EntityState) error) error {
	return scanRows(ctx, s, s.k.entities, fn)
}

// CountRows returns the number of the group's sources and entities.
func (s *Store) CountRows(ctx context.Context) (sources, entities int, err error) {
	if err := s.check(); err != nil {
		return 0, 0, err
	}
	p := s.c.Pipeline()
	ns, ne := p.HLen(ctx, s.k.sources), p.HLen(ctx, s.k.entities)
	if _, err := p.Exec(ctx); err != nil {
		return 0, 0, s.fail("count the rows", err)
	}
	return int(ns.Val()), int(ne.Val()), nil
}

// scanRows calls fn for each row of the hash key, in field order.
func scanRows[T any, P row[T]](ctx context.Context, s *Store, key string, fn func(T) error) error {
	if err := s.check(); err != nil {
		return err
	}
	var fields []string
	var cursor uint64
	for {
		kv, next, err := s.c.HScan(ctx, key, cursor, "", scanChunk).Result()
		if err != nil {
			return s.fail("read "+key, err)
		}
		for i := 0; i < len(kv); i += 2 {
			fields = append(fields, kv[i])
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	slices.Sort(fields)
	fields = slices.Compact(fields)
	for len(fields) > 0 {
		chunk := fields[:min(scanChunk, len(fields))]
		fields = fields[len(chunk):]
		vals, err := s.c.HMGet(ctx, key, chunk...).Result()
		if err != nil {
			return s.fail("read "+key, err)
		}
		for i, v := range vals {
			b, ok := v.(string)
			if !ok {
				continue // deleted since the fields were read
			}
			var row T
			if err := P(&row).UnmarshalBinary([]byte(b)); err != nil {
				return fmt.Errorf("redis store: %s field %q: %w", key, chunk[i], err)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(row); err != nil {
				return err
			}
		}
	}
	return nil
}

// Head returns this member's chain head; zero on a read-only handle.
func (s *Store) Head(ctx context.Context) (engine.AuditHead, error) {
	if err := s.check(); err != nil {
		return engine.AuditHead{}, err
	}
	if s.member == "" {
		return engine.AuditHead{}, nil
	}
	v, err := s.c.HGet(ctx, s.k.heads, s.member).Result()
	if errors.Is(err, goredis.Nil) {
		return engine.AuditHead{}, nil
	}
	if err != nil {
		return engine.AuditHead{}, s.fail("read the chain head", err)
	}
	h, err := decodeHead(v)
	if err != nil {
		return engine.AuditHead{}, fmt.Errorf("redis store: member %q: %w", s.member, err)
	}
	return h, nil
}

// ScanAudit is ScanChain over this member's chain. A read-only handle has
// no chain of its own: use ScanChain with a member id.
func (s *Store) ScanAudit(ctx context.Context, from uint64, fn func(engine.AuditRecord) error) error {
	if err := s.check(); err != nil {
		return err
	}
	if s.member == "" {
		return errors.New("redis store: a read-only handle has no audit chain of its own: name a member (ScanChain)")
	}
	return s.ScanChain(ctx, s.member, from, fn)
}

// ScanChain calls fn for each record of member's chain with position >=
// from, in order, until fn returns an error (which ScanChain returns) or the
// chain ends. An unknown member has an empty chain. A trim while it reads
// (TrimChain) ends the records it dropped: the scan goes on after the new
// base.
func (s *Store) ScanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) error {
	if err := s.check(); err != nil {
		return err
	}
	from = max(from, 1)
	for {
		next, err := s.scanChain(ctx, member, from, fn)
		var gone errBatchGone
		if !errors.As(err, &gone) {
			return err
		}
		base, err := s.ChainBase(ctx, member)
		if err != nil {
			return err
		}
		if base.Position < gone.first { // not trimmed: lost
			return fmt.Errorf("redis store: the audit chain of %q lacks the records from position %d", member, gone.first)
		}
		from = max(next, base.Position+1)
	}
}

// errBatchGone is a batch of records the chain index listed and the chain
// no longer held when it was read.
type errBatchGone struct{ first uint64 }

func (e errBatchGone) Error() string {
	return fmt.Sprintf("the batch from position %d is gone", e.first)
}

// scanChain is ScanChain until it finds a batch gone; then it returns the
// position after the last record it passed to fn, and the errBatchGone.
func (s *Store) scanChain(ctx context.Context, member string, from uint64, fn func(engine.AuditRecord) error) (uint64, error) {
	// The batch holding from starts at or before it.
	starts, err := s.c.ZRangeArgs(ctx, goredis.ZRangeArgs{Key: s.k.chainIndex(member), ByScore: true, Rev: true,
		Start: strconv.FormatUint(from, 10), Stop: "-inf", Count: 1}).Result()
	if err != nil {
		return from, s.fail("read the audit chain index of "+member, err)
	}
	cursor := "-inf"
	if len(starts) == 1 {
		cursor = starts[0]
	}
	// A reader such as a sink's batch stops early: the batches are read
	// one at first, then twice as many each time, up to chainBatches.
	for count := int64(1); ; count = min(2*count, chainBatches) {
		starts, err := s.c.ZRangeArgs(ctx, goredis.ZRangeArgs{Key: s.k.chainIndex(member), ByScore: true,
			Start: cursor, Stop: "+inf", Count: count}).Result()
		if err != nil {
			return from, s.fail("read the audit chain index of "+member, err)
		}
		if len(starts) == 0 {
			return from, nil
		}
		blobs, err := s.c.HMGet(ctx, s.k.chain(member), starts...).Result()
		if err != nil {
			return from, s.fail("read the audit chain of "+member, err)
		}
		for i, v := range blobs {
			v, ok := v.(string)
			if !ok {
				first, _ := strconv.ParseUint(starts[i], 10, 64)
				return from, errBatchGone{first}
			}
			first, _ := strconv.ParseUint(starts[i], 10, 64)
			if from, err = scanRecords(ctx, member, first, v, from, fn); err != nil {
				return from, err
			}
		}
		if int64(len(starts)) < count {
			return from, nil
		}
		cursor = "(" + starts[len(starts)-1]
	}
}

// chainBatches is how many batches of records ScanChain reads per command
// at most.
const chainBatches = 8

// scanRecords decodes one batch's records, one JSON a line, and calls fn
// with those at or after from; it returns the position after the last one
// fn was called with (from when none). A record before from is passed
// over by its position, which begins its line, undecoded. The batch is
// stored under first, its first record's position, and holds its records
// in position order: a line before first, or not after the line before
// it (a line added to the batch), is out of its place, an error, never a
// record passed over that no reader of the chain would see.
func scanRecords(ctx context.Context, member string, first uint64, blob string, from uint64, fn func(engine.AuditRecord) error) (uint64, error) {
	prev := uint64(0) // the position of the batch's line before
	for line := range strings.SplitSeq(blob, "\n") {
		pos, ok := linePosition(line)
		var r engine.AuditRecord
		if !ok || pos >= from {
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				return from, fmt.Errorf("redis store: decode an audit record of %q: %w", member, err)
			}
			pos = r.Position
		}
		if pos < first || (prev != 0 && pos <= prev) {
			return from, fmt.Errorf("redis store: the audit chain of %q holds a record at position %d out of its place, in the batch of positions %d on (after position %d)",
				member, pos, first, prev)
		}
		prev = pos
		if pos < from {
			continue
		}
		if err := ctx.Err(); err != nil {
			return from, err
		}
		if err := fn(r); err != nil {
			return from, err
		}
		from = r.Position + 1
	}
	return from, nil
}

// linePosition reads the position a record's line begins with,
// {"position":N,...; false when it begins otherwise.
func linePosition(line string) (uint64, bool) {
	rest, ok := strings.CutPrefix(line, `{"position":`)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, ",")
	if !ok {
		return 0, false
	}
	pos, err := strconv.ParseUint(digits, 10, 64)
	return pos, err == nil
}

// Chains returns every member's chain head, ordered by member id.
func (s *Store) Chains(ctx context.Context) ([]engine.Chain, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	m, err := s.c.HGetAll(ctx, s.k.heads).Result()
	if err != nil {
		return nil, s.fail("read the chain heads", err)
	}
	out := make([]engine.Chain, 0, len(m))
	for member, v := range m {
		h, err := decodeHead(v)
		if err != nil {
			return nil, fmt.Errorf("redis store: member %q: %w", member, err)
		}
		out = append(out, engine.Chain{Member: member, Head: h})
	}
	slices.SortFunc(out, func(a, b engine.Chain) int { return strings.Compare(a.Member, b.Member) })
	return out, nil
}

// StrayAudit finds the records the store holds outside every chain
// Chains lists: of a member whose head is missing or before its last
// record. It returns the first such member (by id), the position of its
// last record and the head kept; last is zero when every record is in a
// chain. A member's last record is read before its head, so a batch it
// commits between the reads is within the head. The members' ids are
// those the members hash names and those of every chain the store holds
// (chainIDs), so the records of an id removed from the hash are found
// too.
func (s *Store) StrayAudit(ctx context.Context) (member string, last, head uint64, err error) {
	if err := s.check(); err != nil {
		return "", 0, 0, err
	}
	ids, err := s.chainIDs(ctx)
	if err != nil {
		return "", 0, 0, err
	}
	for _, m := range ids {
		if last, err = s.lastRecord(ctx, m); err != nil || last == 0 {
			if err != nil {
				return "", 0, 0, err
			}
			continue
		}
		v, err := s.c.HGet(ctx, s.k.heads, m).Result()
		var h engine.AuditHead
		switch {
		case err == nil:
			if h, err = decodeHead(v); err != nil {
				return "", 0, 0, fmt.Errorf("redis store: member %q: %w", m, err)
			}
		case !errors.Is(err, goredis.Nil):
			return "", 0, 0, s.fail("read the chain head of "+m, err)
		}
		if last > h.Position {
			return m, last, h.Position, nil
		}
	}
	return "", 0, 0, nil
}

// chainIDs returns, sorted, every member id the members hash names and
// every id whose chain or chain index the store holds, found by SCAN over
// the group's chain keys: a member removed from the hash leaves its
// records there. The SCAN walks the server's whole keyspace.
func (s *Store) chainIDs(ctx context.Context) ([]string, error) {
	ids, err := s.c.HKeys(ctx, s.k.members).Result()
	if err != nil {
		return nil, s.fail("read the members", err)
	}
	it := s.c.Scan(ctx, 0, globEscaper.Replace(s.k.prefix)+"chain*", 1000).Iterator()
	for it.Next(ctx) {
		k := strings.TrimPrefix(it.Val(), s.k.prefix)
		m, ok := strings.CutPrefix(k, "chain:")
		if !ok {
			m, ok = strings.CutPrefix(k, "chainindex:")
		}
		if ok && !slices.Contains(ids, m) {
			ids = append(ids, m)
		}
	}
	if err := it.Err(); err != nil {
		return nil, s.fail("find the audit chains", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// lastRecord is the position of the last record of member's chain; zero
// when it holds none. A chain whose index is gone is read from its
// batches' first positions.
func (s *Store) lastRecord(ctx context.Context, member string) (uint64, error) {
	starts, err := s.c.ZRange(ctx, s.k.chainIndex(member), -1, -1).Result()
	if err != nil {
		return 0, s.fail("read the audit chain index of "+member, err)
	}
	if len(starts) == 0 {
		if starts, err = s.lastUnindexed(ctx, member); err != nil || len(starts) == 0 {
			return 0, err
		}
	}
	blob, err := s.c.HGet(ctx, s.k.chain(member), starts[0]).Result()
	if errors.Is(err, goredis.Nil) { // its last batch trimmed meanwhile: it holds none
		return 0, nil
	}
	if err != nil {
		return 0, s.fail("read the audit chain of "+member, err)
	}
	var r engine.AuditRecord
	if err := json.Unmarshal([]byte(blob[strings.LastIndexByte(blob, '\n')+1:]), &r); err != nil {
		return 0, fmt.Errorf("redis store: decode an audit record of %q: %w", member, err)
	}
	return r.Position, nil
}

// lastUnindexed returns the highest first position of a batch member's
// chain holds, read from the chain itself (none when it holds none).
func (s *Store) lastUnindexed(ctx context.Context, member string) ([]string, error) {
	fields, err := s.c.HKeys(ctx, s.k.chain(member)).Result()
	if err != nil {
		return nil, s.fail("read the audit chain of "+member, err)
	}
	var last string
	top := uint64(0)
	for _, f := range fields {
		if n, err := strconv.ParseUint(f, 10, 64); err == nil && n >= top {
			top, last = n, f
		}
	}
	if last == "" {
		return nil, nil
	}
	return []string{last}, nil
}

// CountQuarantine counts the group's open entries without reading them.
func (s *Store) CountQuarantine(ctx context.Context) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	n, err := s.c.HLen(ctx, s.k.quarantine).Result()
	if err != nil {
		return 0, s.fail("count the quarantine", err)
	}
	return int(n), nil
}

// ScanQuarantine calls fn for each open entry of the group in id order.
func (s *Store) ScanQuarantine(ctx context.Context, fn func(engine.QuarantineEntry) error) error {
	if err := s.check(); err != nil {
		return err
	}
	from := "-"
	for {
		ids, err := s.c.ZRangeByLex(ctx, s.k.quarIDs, &goredis.ZRangeBy{Min: from, Max: "+", Count: scanChunk}).Result()
		if err != nil {
			return s.fail("read the quarantine", err)
		}
		if len(ids) == 0 {
			return nil
		}
		vals, err := s.c.HMGet(ctx, s.k.quarantine, ids...).Result()
		if err != nil {
			return s.fail("read the quarantine", err)
		}
		for i, v := range vals {
			v, ok := v.(string)
			if !ok {
				continue // resolved since the ids were read
			}
			q, err := decodeQuarantine(ids[i], v)
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(q); err != nil {
				return err
			}
		}
		if len(ids) < scanChunk {
			return nil
		}
		from = "(" + ids[len(ids)-1]
	}
}

// Quarantined returns the open entry id, or engine.ErrNotFound.
func (s *Store) Quarantined(ctx context.Context, id uint64) (engine.QuarantineEntry, error) {
	if err := s.check(); err != nil {
		return engine.QuarantineEntry{}, err
	}
	hex := quarantineID(id)
	v, err := s.c.HGet(ctx, s.k.quarantine, hex).Result()
	if errors.Is(err, goredis.Nil) {
		return engine.QuarantineEntry{}, fmt.Errorf("%w: quarantine entry %d", engine.ErrNotFound, id)
	}
	if err != nil {
		return engine.QuarantineEntry{}, s.fail("read quarantine entry", err)
	}
	return decodeQuarantine(hex, v)
}

func decodeQuarantine(id, v string) (engine.QuarantineEntry, error) {
	var q engine.QuarantineEntry
	if err := json.Unmarshal([]byte(v), &q); err != nil {
		return q, fmt.Errorf("redis store: decode quarantine entry %s: %w", id, err)
	}
	return q, nil
}
