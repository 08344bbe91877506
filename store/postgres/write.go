package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replayguard/replayguard/engine"
)

// update is what Update adds to a write: the key cutoff, which sources
// ("s"+id) and entities ("e"+name) were read as present, and which were
// claimed (read absent: the read inserted each with an empty state),
// with how many claims of each kind there are. A write without it
// (Commit) upserts.
type update struct {
	cutoff  int64
	keys    map[engine.Hash]bool // keys read as present
	known   map[string]bool
	claimed map[string]bool
	claims  map[string]int // by kind, "s" or "e"
}

// newUpdate returns the update of an Update that read r and found rows.
func newUpdate(r *engine.Reads, rows *engine.Rows) *update {
	u := &update{cutoff: r.KeyCutoff, known: make(map[string]bool, len(rows.Sources)+len(rows.Entities)),
		claimed: map[string]bool{}, claims: map[string]int{}, keys: make(map[engine.Hash]bool, len(rows.Keys))}
	for _, k := range rows.Keys {
		u.keys[k.Key] = true
	}
	for i := range rows.Sources {
		u.known["s"+rows.Sources[i].ID()] = true
	}
	for _, e := range rows.Entities {
		u.known["e"+e.Name] = true
	}
	u.claim("s", r.Sources, rows.Held.Sources)
	u.claim("e", r.Entities, rows.Held.Entities)
	return u
}

// heldName reports whether name is among held (ascending).
func heldName(held []string, name string) bool {
	_, ok := slices.BinarySearch(held, name)
	return ok
}

// claim records which of names of kind were neither read as present nor
// left out as held by another transaction: the read claimed each of them.
func (u *update) claim(kind string, names, held []string) {
	for _, name := range names {
		if !u.known[kind+name] && !heldName(held, name) {
			u.claimed[kind+name] = true
			u.claims[kind]++
		}
	}
}

// write writes b in tx after the member's head, keys first: an Update's
// keys, when it read none of them as present, by a COPY (copyKeys), the
// other rows by statements in one round trip, the audit records by a COPY
// after them. In an Update, a key another member wrote first fails it with
// errLostRace, as does a quarantine entry of a message another member's
// open entry holds (heldInserted), an open quarantine entry that is gone
// with engine.ErrNotFound; the rows it read or claimed are updated, and the
// claims it does not write are deleted.
func (s *Store) write(ctx context.Context, tx pgx.Tx, b *engine.Batch, head engine.AuditHead, u *update) error {
	newHead, err := engine.NextHead(head, b.Audit)
	if err != nil {
		return err
	}
	var q pgx.Batch
	var checks []func(pgx.BatchResults) error
	queue := func(check func(pgx.BatchResults) error, sql string, args ...any) {
		q.Queue(sql, args...)
		checks = append(checks, check)
	}
	var keyCopy []byte // an Update's keys, all read as absent, copied in before the statements
	if len(b.Keys) > 0 {
		keys, digests, times, ords := keyColumns(b.Keys)
		switch {
		case u == nil:
			queue(execd, s.sql.upsertKeys, keys, digests, times, ords)
		case u.readAny(b.Keys): // one expired is written over
			queue(returned(len(b.Keys), "key"), s.sql.insertKeys, keys, digests, times, ords, u.cutoff)
		default:
			keyCopy = keysCopy(keys, digests, times, ords)
		}
	}
	srcIDs, srcStates, err := sourceColumns(b.Sources)
	if err != nil {
		return err
	}
	s.queueRows(queue, u, "s", srcIDs, srcStates, rowStatements{s.sql.insertSources, s.sql.updateSources, s.sql.upsertSources, s.sql.dropSourceClaims})
	entNames, entStates, err := entityColumns(b.Entities)
	if err != nil {
		return err
	}
	s.queueRows(queue, u, "e", entNames, entStates, rowStatements{s.sql.insertEntities, s.sql.updateEntities, s.sql.upsertEntities, s.sql.dropEntityClaims})
	var audit []byte // the records, copied in after the statements
	if len(b.Audit) > 0 {
		if audit, err = auditCopy(s.auditBuf.take(), s.number, b.Audit); err != nil {
			return err
		}
		queue(execd, s.sql.setHead, s.member, int64(newHead.Position), newHead.Hash[:])
	}
	if u != nil && len(b.HeldOpen) > 0 {
		ids := heldOpenIDs(b)
		queue(affected(len(ids), heldGone), s.sql.heldOpen, ids)
	}
	if len(b.Resolved) > 0 { // before the inserts: an entry resolved leaves its held value to a new one
		ids := make([]int64, len(b.Resolved))
		for i, id := range b.Resolved {
			ids[i] = int64(id)
		}
		if u != nil {
			queue(resolved(b.Resolved), s.sql.resolve, ids)
		} else {
			queue(execd, s.sql.resolveAny, ids)
		}
	}
	if len(b.Quarantine) > 0 {
		ids, entries, payloads, held, err := quarantineColumns(b.Quarantine)
		if err != nil {
			return err
		}
		queue(heldInserted, s.sql.insertQuar, ids, entries, payloads, held)
	}
	if err := s.queueOutbox(queue, b); err != nil {
		return err
	}
	if keyCopy != nil {
		if err := s.copyKeys(ctx, tx, keyCopy, len(b.Keys)); err != nil {
			return err
		}
	}
	if err := sendChecked(ctx, tx, &q, checks); err != nil {
		return err
	}
	if audit != nil {
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(audit), s.sql.copyAudit); err != nil {
			return dbErr(err)
		}
		s.auditBuf.give(audit)
	}
	return nil
}

// sendChecked sends q's statements in one round trip and checks each
// one's result with its check, in order, until one fails.
func sendChecked(ctx context.Context, tx pgx.Tx, q *pgx.Batch, checks []func(pgx.BatchResults) error) error {
	if q.Len() == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, q)
	var err error
	for _, check := range checks {
		if err = check(br); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = dbErr(cerr)
	}
	return err
}

// readAny reports whether any of ks was read as present.
func (u *update) readAny(ks []engine.KeyEntry) bool {
	for i := range ks {
		if u.keys[ks[i].Key] {
			return true
		}
	}
	return false
}

// copyKeys copies n keys, read as absent by this Update, into the keys
// table (data from keysCopy). The key's uniqueness decides: a key another
// member inserted after the read fails the copy, as a lost race, and an
// insert another member has not committed is waited for, as by an insert.
func (s *Store) copyKeys(ctx context.Context, tx pgx.Tx, data []byte, n int) error {
	_, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(data), s.sql.copyKeys)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%w: one of %d key rows (%s)", errLostRace, n, pe.Message)
	}
	return dbErr(err)
}

// rowStatements are the statements that write sources or entities.
type rowStatements struct{ insert, update, upsert, dropClaims string }

// queueRows queues the writes of sources or entities: in an Update, the
// rows it read or claimed are updated (each must be there: this Update
// holds them), any other is inserted (one another member inserted first
// is a lost race), and the claims it does not write are deleted; Commit
// upserts them all.
func (s *Store) queueRows(queue func(func(pgx.BatchResults) error, string, ...any), u *update, kind string,
	ids, states [][]byte, st rowStatements) {
	if u == nil {
		if len(ids) > 0 {
			queue(execd, st.upsert, byteaArray(ids), byteaArray(states))
		}
		return
	}
	what := map[string]string{"s": "source", "e": "entity"}[kind]
	var newIDs, newStates, heldIDs, heldStates [][]byte
	claims := 0 // claims written
	for i, id := range ids {
		name := kind + string(id)
		if u.claimed[name] {
			claims++
		}
		if u.known[name] || u.claimed[name] {
			heldIDs, heldStates = append(heldIDs, id), append(heldStates, states[i])
		} else {
			newIDs, newStates = append(newIDs, id), append(newStates, states[i])
		}
	}
	if len(newIDs) > 0 {
		queue(returned(len(newIDs), what), st.insert, byteaArray(newIDs), byteaArray(newStates))
	}
	if len(heldIDs) > 0 {
		queue(held(len(heldIDs), what), st.update, byteaArray(heldIDs), byteaArray(heldStates))
	}
	if claims < u.claims[kind] {
		drop := u.unwritten(kind, ids)
		queue(held(len(drop), what+" claim"), st.dropClaims, byteaArray(drop))
	}
}

// unwritten returns the claims of kind that ids does not name, in key
// order, as every writer takes rows.
func (u *update) unwritten(kind string, ids [][]byte) [][]byte {
	written := make(map[string]bool, len(ids))
	for _, id := range ids {
		written[string(id)] = true
	}
	var out [][]byte
	for name := range u.claimed {
		if name[:1] == kind && !written[name[1:]] {
			out = append(out, []byte(name[1:]))
		}
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}

// held checks that a statement on n rows this Update holds (read under a
// lock, or claimed) found every one of them.
func held(n int, what string) func(pgx.BatchResults) error {
	return affected(n, func(missing int64) string {
		return fmt.Sprintf("%d of the %d %s rows this update holds are gone", missing, n, what)
	})
}

// execd checks a statement that returns nothing.
func execd(br pgx.BatchResults) error {
	_, err := br.Exec()
	return dbErr(err)
}

// returned checks that an insert … RETURNING returned all n rows: a row
// missing was written by another member first.
func returned(n int, what string) func(pgx.BatchResults) error {
	return affected(n, func(missing int64) string { return fmt.Sprintf("%d of %d %s rows", missing, n, what) })
}

// affected checks that a statement affected n rows; fewer are a lost race,
// which why describes from how many are missing.
func affected(n int, why func(missing int64) string) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err != nil {
			return dbErr(err)
		}
		if got := tag.RowsAffected(); got != int64(n) {
			return fmt.Errorf("%w: %s", errLostRace, why(int64(n)-got))
		}
		return nil
	}
}

// resolved checks that every entry ids names was deleted by this batch.
func resolved(ids []uint64) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		rs, err := br.Query()
		if err != nil {
			return dbErr(err)
		}
		gone := map[uint64]bool{}
		for rs.Next() {
			var id int64
			if err := rs.Scan(&id); err != nil {
				return dbErr(err)
			}
			gone[uint64(id)] = true
		}
		if err := rs.Err(); err != nil {
			return dbErr(err)
		}
		for _, id := range ids {
			if !gone[id] {
				return fmt.Errorf("%w: quarantine entry %d is no longer open; nothing written", engine.ErrNotFound, id)
			}
		}
		return nil
	}
}

// keyColumns packs keys and digests 32 bytes apiece into one value each,
// which the statement cuts up: an array of 500 byteas costs the client
// far more to encode.
func keyColumns(ks []engine.KeyEntry) (keys, digests []byte, times, ords []int64) {
	ks = slices.Clone(ks) // ascending by key, as every writer inserts them: no deadlock between two
	slices.SortFunc(ks, func(a, b engine.KeyEntry) int { return slices.Compare(a.Key[:], b.Key[:]) })
	keys, digests = make([]byte, 0, 32*len(ks)), make([]byte, 0, 32*len(ks))
	times, ords = make([]int64, len(ks)), make([]int64, len(ks))
	for i := range ks {
		keys, digests = append(keys, ks[i].Key[:]...), append(digests, ks[i].Digest[:]...)
		times[i], ords[i] = ks[i].Time, int64(ks[i].Ordinal)
	}
	return keys, digests, times, ords
}

func sourceColumns(ss []engine.SourceState) (ids, states [][]byte, err error) {
	ids, states = make([][]byte, len(ss)), make([][]byte, len(ss))
	for i := range ss {
		ids[i] = []byte(ss[i].ID())
		if states[i], err = ss[i].MarshalBinary(); err != nil {
			return nil, nil, fmt.Errorf("postgres store: encode source %q: %w", ss[i].Route, err)
		}
	}
	return ids, states, nil
}

func entityColumns(es []engine.EntityState) (names, states [][]byte, err error) {
	names, states = make([][]byte, len(es)), make([][]byte, len(es))
	for i := range es {
		names[i] = []byte(es[i].Name)
		if states[i], err = es[i].MarshalBinary(); err != nil {
			return nil, nil, fmt.Errorf("postgres store: encode entity %q: %w", es[i].Name, err)
		}
	}
	return names, states, nil
}

// keysCopy encodes the keys' columns (keyColumns: 32 bytes a key and a
// digest) as the data of a binary COPY into the keys table (copyKeys), in
// their order.
func keysCopy(keys, digests []byte, times, ords []int64) []byte {
	out := make([]byte, 0, 19+len(times)*(2+4*4+32+32+8+8)+2)
	out = append(out, copyHeader...)
	for i := range times {
		out = binary.BigEndian.AppendUint16(out, 4) // fields
		out = binary.BigEndian.AppendUint32(out, 32)
		out = append(out, keys[32*i:32*i+32]...)
		out = binary.BigEndian.AppendUint32(out, 32)
		out = append(out, digests[32*i:32*i+32]...)
		out = binary.BigEndian.AppendUint32(out, 8)
		out = binary.BigEndian.AppendUint64(out, uint64(times[i]))
		out = binary.BigEndian.AppendUint32(out, 8)
		out = binary.BigEndian.AppendUint64(out, uint64(ords[i]))
	}
	return binary.BigEndian.AppendUint16(out, 0xffff) // trailer
}

// copyHeader starts the data of a binary COPY: the signature, no flags,
// no header extension.
const copyHeader = "PGCOPY\n\377\r\n\000\000\000\000\000\000\000\000\000"

// auditCopy appends to buf (emptied) member's records as the data of a
// binary COPY into the audit table (copyAudit): a COPY costs the server a
// third less than an INSERT of the same rows from arrays, as it writes
// them a page at a time.
func auditCopy(buf []byte, member int64, rs []engine.AuditRecord) ([]byte, error) {
	out := slices.Grow(buf[:0], 19+900*len(rs)+2)
	out = append(out, copyHeader...)
	for i := range rs {
		out = binary.BigEndian.AppendUint16(out, 3) // fields
		out = binary.BigEndian.AppendUint32(out, 8)
		out = binary.BigEndian.AppendUint64(out, uint64(member))
		out = binary.BigEndian.AppendUint32(out, 8)
		out = binary.BigEndian.AppendUint64(out, rs[i].Position)
		at := len(out)
		out = append(out, 0, 0, 0, 0) // the record's length, once known
		var err error
		if out, err = engine.AppendRecordJSON(out, &rs[i]); err != nil {
			return nil, fmt.Errorf("postgres store: encode audit record %d: %w", rs[i].Position, err)
		}
		binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	}
	return binary.BigEndian.AppendUint16(out, 0xffff), nil // trailer
}

func quarantineColumns(qs []engine.QuarantineEntry) (ids []int64, entries, payloads, held [][]byte, err error) {
	ids, entries, payloads, held = make([]int64, len(qs)), make([][]byte, len(qs)), make([][]byte, len(qs)), make([][]byte, len(qs))
	for i, q := range qs {
		ids[i] = int64(q.ID)
		held[i] = heldValue(q)
		payloads[i] = q.Payload
		if payloads[i] == nil {
			payloads[i] = []byte{} // NOT NULL
		}
		q.Payload = nil
		if entries[i], err = json.Marshal(&q); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("postgres store: encode quarantine entry %d: %w", q.ID, err)
		}
	}
	return ids, entries, payloads, held, nil
}
