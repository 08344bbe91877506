package postgres

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// statements are the SQL texts of one schema.
type statements struct {
	// lease
	addMember, lockLease, takeLease, takeOver, readLease, extend, renew, release string
	// Update and Commit
	lockMember, lockSources, lockEntities, readKeys                                string
	lockSourcesNowait, lockEntitiesNowait, dropSourceClaims, dropEntityClaims      string
	lockSourcesSkip, lockEntitiesSkip                                              string
	sqlShared, sqlAlone                                                            string // the group's lock of sql effects (runSQL)
	insertKeys, upsertKeys, copyKeys, insertSources, updateSources, upsertSources  string
	insertEntities, updateEntities, upsertEntities, copyAudit, setHead, insertQuar string
	resolve, resolveAny                                                            string
	findHeld, heldOpen                                                             string
	// reads
	allSources, allEntities, head, chains, strayAudit, scanAudit, scanQuar, countQuar, quarantined, memberNumber string
	scanSources, scanEntities, countRows                                                                         string
	// pruning
	pruneAge, pruneCutoff, pruneCount string
	analyzeDue, analyze               string
	outbox                            outboxStatements
	chain                             chainStatements
	// routes' key derivations
	insertRoutes, readRoutes string
	// share groups
	joinShare, quitShare, lockShares, leaveShare string
	adopt                                        adoptStatements
	paths                                        pathStatements
}

func newStatements(schema string) statements {
	s := pgx.Identifier{schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{s}", s) }
	return statements{
		// A member's lease is its holder, in its members row, and an
		// expiry in its leases row (schema version 8), which a renewal
		// updates without waiting for a batch that holds the members row.
		// A member registered is not inserted again: the insert would
		// wait for a batch that updates its row.
		addMember: q(`WITH m AS (INSERT INTO {s}.members (member) SELECT $1
				WHERE NOT EXISTS (SELECT FROM {s}.members WHERE member = $1) ON CONFLICT DO NOTHING)
			INSERT INTO {s}.leases (member) SELECT $1
				WHERE NOT EXISTS (SELECT FROM {s}.leases WHERE member = $1) ON CONFLICT DO NOTHING`),
		lockLease: q(`SELECT expires < now() FROM {s}.leases WHERE member = $1 FOR UPDATE`),
		takeLease: q(`UPDATE {s}.members SET holder = $2
			WHERE member = $1 AND (holder = '' OR holder = $2 OR $3) RETURNING number`),
		takeOver:  q(`UPDATE {s}.members SET holder = $2 WHERE member = $1 AND holder = $3 RETURNING number`),
		readLease: q(`SELECT m.holder, l.expires FROM {s}.members m JOIN {s}.leases l USING (member) WHERE member = $1`),
		// The expiry runs from the statement's end (clock_timestamp), not
		// from its transaction's start: a takeover waits for the old
		// holder's batch, a renewal for a takeover, maybe longer than
		// the lease. A renewal runs under the lease row's lock
		// (lockLease), in a statement of its own after it: a holder
		// read in the statement that waited for a takeover's lock would
		// be the one before the takeover.
		// A lease taken holds no share group until its member joins one,
		// on none of its paths either.
		extend: q(`WITH paths AS (DELETE FROM {s}.share_paths WHERE member = $1)
			UPDATE {s}.leases SET expires = clock_timestamp() + $2::bigint * interval '1 microsecond', share = '', share_lost = NULL
			WHERE member = $1 RETURNING expires`),
		renew: q(`UPDATE {s}.leases l SET expires = clock_timestamp() + $3::bigint * interval '1 microsecond'
			FROM {s}.members m WHERE l.member = $1 AND m.member = l.member AND m.holder = $2 RETURNING l.expires`),
		release: q(`UPDATE {s}.members SET holder = '' WHERE member = $1 AND holder = $2`),

		lockMember:         q(`SELECT holder, head_position, head_hash FROM {s}.members WHERE member = $1 FOR UPDATE`),
		lockSources:        q(lockOrClaim("sources", "id", "", claimClass(schema, "sources"))),
		lockEntities:       q(lockOrClaim("entities", "name", "", claimClass(schema, "entities"))),
		lockSourcesNowait:  q(lockOrClaim("sources", "id", " NOWAIT", claimClass(schema, "sources"))),
		lockEntitiesNowait: q(lockOrClaim("entities", "name", " NOWAIT", claimClass(schema, "entities"))),
		lockSourcesSkip:    q(lockOrClaim("sources", "id", " SKIP LOCKED", claimClass(schema, "sources"))),
		lockEntitiesSkip:   q(lockOrClaim("entities", "name", " SKIP LOCKED", claimClass(schema, "entities"))),
		dropSourceClaims:   q(`DELETE FROM {s}.sources WHERE id = ANY($1) AND state = ''::bytea`),
		dropEntityClaims:   q(`DELETE FROM {s}.entities WHERE name = ANY($1) AND state = ''::bytea`),
		readKeys:           q(`SELECT key, digest, time, ordinal FROM {s}.keys WHERE key = ANY($1)`),
		sqlShared:          `SELECT pg_advisory_xact_lock_shared(` + strconv.Itoa(int(claimClass(schema, "sql effects"))) + `, 0)`,
		sqlAlone:           `SELECT pg_advisory_xact_lock(` + strconv.Itoa(int(claimClass(schema, "sql effects"))) + `, 0)`,

		insertKeys: q(`INSERT INTO {s}.keys AS k (key, digest, time, ordinal)
			SELECT substring($1::bytea FROM (i * 32 - 31)::integer FOR 32), substring($2::bytea FROM (i * 32 - 31)::integer FOR 32), t, o
			FROM unnest($3::bigint[], $4::bigint[]) WITH ORDINALITY AS u(t, o, i)
			ON CONFLICT (key) DO UPDATE SET digest = excluded.digest, time = excluded.time, ordinal = excluded.ordinal
			WHERE k.time < $5 RETURNING key`),
		upsertKeys: q(`INSERT INTO {s}.keys AS k (key, digest, time, ordinal)
			SELECT substring($1::bytea FROM (i * 32 - 31)::integer FOR 32), substring($2::bytea FROM (i * 32 - 31)::integer FOR 32), t, o
			FROM unnest($3::bigint[], $4::bigint[]) WITH ORDINALITY AS u(t, o, i)
			ON CONFLICT (key) DO UPDATE SET digest = excluded.digest, time = excluded.time, ordinal = excluded.ordinal`),
		insertSources: q(`INSERT INTO {s}.sources (id, state) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT DO NOTHING RETURNING id`),
		updateSources: q(`UPDATE {s}.sources t SET state = u.state FROM unnest($1::bytea[], $2::bytea[]) u(id, state)
			WHERE t.id = u.id`),
		upsertSources: q(`INSERT INTO {s}.sources (id, state) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT (id) DO UPDATE SET state = excluded.state`),
		insertEntities: q(`INSERT INTO {s}.entities (name, state) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT DO NOTHING RETURNING name`),
		updateEntities: q(`UPDATE {s}.entities t SET state = u.state FROM unnest($1::bytea[], $2::bytea[]) u(name, state)
			WHERE t.name = u.name`),
		upsertEntities: q(`INSERT INTO {s}.entities (name, state) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT (name) DO UPDATE SET state = excluded.state`),
		copyKeys:   q(`COPY {s}.keys (key, digest, time, ordinal) FROM STDIN (FORMAT binary)`),
		copyAudit:  q(`COPY {s}.audit (member, position, record) FROM STDIN (FORMAT binary)`),
		setHead:    q(`UPDATE {s}.members SET head_position = $2, head_hash = $3 WHERE member = $1`),
		insertQuar: q(`INSERT INTO {s}.quarantine (id, entry, payload, held) SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::bytea[])`),
		// The entry a delivery held again is a duplicate of, and the lock
		// by which a batch relies on it: a release's or a discard's DELETE
		// waits for the batch, and a batch locking after it finds the
		// entry gone.
		findHeld:   q(`SELECT id FROM {s}.quarantine WHERE held = $1 ORDER BY id LIMIT 1`),
		heldOpen:   q(`SELECT id FROM {s}.quarantine WHERE id = ANY($1) FOR KEY SHARE`),
		resolve:    q(`DELETE FROM {s}.quarantine WHERE id = ANY($1) RETURNING id`),
		resolveAny: q(`DELETE FROM {s}.quarantine WHERE id = ANY($1)`),

		allSources:  q(`SELECT state FROM {s}.sources ORDER BY id`),
		allEntities: q(`SELECT state FROM {s}.entities ORDER BY name`),
		// The next chunk of rows after a key ('\x' before every key).
		scanSources:  q(`SELECT id, state FROM {s}.sources WHERE id > $1 ORDER BY id LIMIT $2`),
		scanEntities: q(`SELECT name, state FROM {s}.entities WHERE name > $1 ORDER BY name LIMIT $2`),
		countRows:    q(`SELECT (SELECT count(*) FROM {s}.sources), (SELECT count(*) FROM {s}.entities)`),
		head:         q(`SELECT head_position, head_hash FROM {s}.members WHERE member = $1`),
		chains:       q(`SELECT member, head_position, head_hash FROM {s}.members WHERE head_position > 0 ORDER BY member`),
		// One statement, one snapshot: a batch writes its records and its
		// member's head in one transaction, so no record is past its head.
		strayAudit: q(`SELECT coalesce(m.member, '#' || a.member), max(a.position), coalesce(max(m.head_position), 0)
			FROM {s}.audit a LEFT JOIN {s}.members m ON m.number = a.member
			WHERE m.number IS NULL OR a.position > m.head_position
			GROUP BY a.member, m.member ORDER BY a.member LIMIT 1`),
		scanAudit: q(`SELECT record FROM {s}.audit
			WHERE member = (SELECT number FROM {s}.members WHERE member = $1) AND position >= $2 ORDER BY position LIMIT $3`),
		scanQuar:     q(`SELECT id, entry, payload FROM {s}.quarantine WHERE id >= $1 ORDER BY id LIMIT $2`),
		countQuar:    q(`SELECT count(*) FROM {s}.quarantine`),
		quarantined:  q(`SELECT id, entry, payload FROM {s}.quarantine WHERE id = $1`),
		memberNumber: q(`SELECT number FROM {s}.members WHERE member = $1`),

		// The conditions are written again outside the subquery: a row a
		// member updated (a key applied again) after the subquery's
		// snapshot is deleted only if its new version still meets them, as
		// the row lock's recheck looks at the outer WHERE alone.
		pruneAge:    q(`DELETE FROM {s}.keys WHERE key IN (SELECT key FROM {s}.keys WHERE ordinal < $1 AND time < $1 LIMIT $2) AND ordinal < $1 AND time < $1`),
		pruneCutoff: q(`SELECT ordinal FROM {s}.keys ORDER BY ordinal DESC OFFSET $1 LIMIT 1`),
		pruneCount:  q(`DELETE FROM {s}.keys WHERE key IN (SELECT key FROM {s}.keys WHERE ordinal <= $1 LIMIT $2) AND ordinal <= $1`),
		// Whether the table was ever analyzed (by autovacuum or by
		// analyzeNew), and whether it holds $1 keys (the count stops there).
		analyzeDue: q(`SELECT coalesce(t.last_analyze, t.last_autoanalyze) IS NOT NULL,
			(SELECT count(*) FROM (SELECT FROM {s}.keys LIMIT $1) k) >= $1
			FROM pg_stat_user_tables t WHERE t.relid = to_regclass($2)`),
		analyze: q(`ANALYZE {s}.keys, {s}.sources, {s}.entities`),

		outbox: newOutboxStatements(q),
		chain:  newChainStatements(q),

		insertRoutes: q(`INSERT INTO {s}.routes (name, derivation)
			SELECT n, d FROM unnest($1::text[], $2::bytea[]) AS u(n, d) ORDER BY n ON CONFLICT DO NOTHING`),
		readRoutes: q(`SELECT name, derivation FROM {s}.routes WHERE name = ANY($1::text[])`),

		// A member leaves its share group only while another live member
		// holds the group's subscription. Requests to leave take one
		// advisory lock in turn, and each reads the others' rows in a
		// statement after it: of two members leaving at once, the second
		// sees the first's leave committed (READ COMMITTED alone would let
		// each see the other still in the group).
		// A share lost (its member's connection to the broker lost) stays
		// recorded, marked at the store's time of its first loss, so that
		// a live member adopts its session once it stays lost; it counts
		// for no member leaving, and joining clears the mark.
		joinShare:  q(`UPDATE {s}.leases SET share = $2, share_client = $3, share_holder = $4, share_lost = NULL WHERE member = $1`),
		quitShare:  q(`UPDATE {s}.leases SET share_lost = coalesce(share_lost, clock_timestamp()) WHERE member = $1 AND share = $2`),
		lockShares: `SELECT pg_advisory_xact_lock(` + strconv.Itoa(int(claimClass(schema, "leases"))) + `, 0)`,
		leaveShare: q(`UPDATE {s}.leases SET share = '' WHERE member = $1 AND share = $2 AND share_lost IS NULL AND EXISTS (
				SELECT FROM {s}.leases o JOIN {s}.members m USING (member)
				WHERE o.member <> $1 AND o.share = $2 AND o.share_lost IS NULL AND m.holder <> '' AND o.expires > clock_timestamp())
			RETURNING true`),
		adopt: newAdoptStatements(q),
		paths: newPathStatements(q),
	}
}

// claimClass is the first key of the advisory locks by which claims of
// table's rows in schema are taken: one a group's table.
func claimClass(schema, table string) int32 {
	h := fnv.New32a()
	h.Write([]byte("replayguard claim " + schema + "." + table))
	return int32(h.Sum32())
}

// lockOrClaim is the statement by which an Update takes the rows of table
// that $1 names: it locks those present (FOR UPDATE, in key order) and
// returns each one's name and state, then claims the absent ones by
// inserting each, in key order, with an empty state, which no committed
// row has: each claim is returned with an empty state. A row another
// transaction is inserting is waited for, not raced; one it committed after
// this statement's snapshot is neither locked nor claimed, which the
// caller sees as a name not returned, and reads again. So is, with SKIP
// LOCKED, a row another transaction holds: the insert leaves out every
// row the snapshot has, as an insert that met the row would wait for a
// holder that wrote it and has not committed. The claims are the Update's until it
// commits: it writes their states or deletes them (dropSourceClaims,
// dropEntityClaims), so no other transaction ever sees an empty state.
//
// Each claim first takes an advisory lock of its name (in class, the
// table's) for the transaction, in $1's order (ascending): waiting for it,
// or with SKIP LOCKED trying it and leaving the name out when another
// transaction holds it. An insert that meets another transaction's
// uncommitted claim waits for that transaction to end, which SKIP LOCKED
// cannot skip; the advisory lock is how it sees such a claim.
func lockOrClaim(table, key, lock string, class int32) string {
	name := strconv.Itoa(int(class)) + `, hashtext(encode(u.n, 'hex'))`
	absent := `u.n NOT IN (SELECT ` + key + ` FROM l)`
	claim := `(SELECT true FROM pg_advisory_xact_lock(` + name + `))`
	if lock == " SKIP LOCKED" {
		// A row locked is present: the probe of the table is for the
		// names left out (skipped, or absent) alone, not for every name.
		absent += ` AND NOT EXISTS (SELECT FROM {s}.` + table + ` t WHERE t.` + key + ` = u.n)`
		claim = `pg_try_advisory_xact_lock(` + name + `)`
	}
	return `WITH l AS (SELECT ` + key + `, state FROM {s}.` + table + ` WHERE ` + key + ` = ANY($1) ORDER BY ` + key + ` FOR UPDATE` + lock + `),
		c AS (INSERT INTO {s}.` + table + ` (` + key + `, state)
			SELECT u.n, ''::bytea FROM unnest($1::bytea[]) AS u(n) WHERE CASE WHEN ` + absent + ` THEN ` + claim + ` ELSE false END ORDER BY u.n
			ON CONFLICT DO NOTHING RETURNING ` + key + `)
		SELECT ` + key + `, state FROM l UNION ALL SELECT ` + key + `, ''::bytea FROM c`
}
