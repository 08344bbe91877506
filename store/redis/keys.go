package redis

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/replayguard/replayguard/engine"
)

// The layout, schema version 8. Every key starts with the prefix P, whose
// hash tag puts the group in one Redis Cluster slot:
//
//	P schema              string: the schema version
//	P members             hash: member id → its number (stable forever)
//	P members:last        string: the last number given
//	P lease:<member>      string: the lease holder, "place pid nonce" (shared.NewHolder), PX the lease
//	P heads               hash: member id → chain head, "<position> <hex hash>"
//	P chain:<member>      hash: a batch's first position → its audit records, one JSON a line
//	P chainindex:<member> sorted set: the same first positions, scored by themselves
//	P key:<32 bytes>      string: digest (32 bytes), time and ordinal (8 bytes each, big
//	                      endian), PX the TTL
//	P keyset:<id>         string: one batch's keys, each 32 bytes and its ordinal (8 bytes),
//	                      PX the TTL, so it expires with them
//	P keys                sorted set, all scores 0: "<first ordinal, 8 bytes><id>:<size>" per
//	                      key set, so in ordinal order
//	P keys:count          string: the keys the key sets hold
//	P source, P entity    hash: SourceState.ID() / entity name → engine's binary row
//	                      (JSON under version 1, still read)
//	P source:version,
//	P entity:version      hash: the same ids → version, incremented by each write
//	P quarantine          hash: 16 hex digits of the id → entry JSON (payload base64)
//	P quarantine:ids      sorted set, all scores 0: the same hex ids, in id order
//	P quarantine:held     sorted set, all scores 0: "<key hex><content hex>:<hex id>" of each
//	                      open entry of a message with a key (engine.HeldFinder), so
//	                      by key and content, then id
//	P quarantine:heldby   hash: hex id → its member of quarantine:held
//	P prune               string: the pruning task's holder, PX
//	P lock:s:<id>,
//	P lock:e:<name>       string: the token of the Update holding the source's or entity's
//	                      row lock, PX; neither in the AOF nor on a replica
//	P unlocked            pub/sub channel: told whenever an Update deletes its row locks
//	P outbox…:<member>    the member's outbox and its claim, see outbox.go
//	P chainbases          hash: member id → its chain's base, "<position> <hex hash>": the
//	                      last record audit retention dropped; absent until the first trim
//	P chaincursors:<member>
//	                      hash: audit sink name → the position of the last record of the
//	                      member's chain the sink delivered
//	P chainclaim:<member> string: the holder that keeps the member's chain, PX the lease TTL
//	P routes              hash: route name → its key derivation (engine.KeyDerivation),
//	                      written once, by the first member that opens the route
//	P shares              hash: member id → the MQTT share group it holds (ShareMembership);
//	                      cleared when the member takes its lease, counted only while
//	                      its lease is live
//	P sharesessions       hash: member id → the MQTT session holding its share: the holder of
//	                      the lease that recorded it, a newline, the session's client id
//	                      (ShareAdopter); written with shares, read only along with it
//	P shareclaim:<member> string: the holder adopting the member's session, PX the lease TTL
//	P sharepaths:<member> hash: path name → the share the member holds on that path of its
//	                      mqtt.feeds (SharePaths): the group, the lease holder that recorded
//	                      it, the session's client id, the path's brokers and the group's
//	                      filters, one a line (the lists as JSON); cleared when the member
//	                      takes its lease
//	P sharepathclaim:<path>:<member>
//	                      string: the holder adopting the member's session on the path, PX
//	                      the lease TTL
//	P sharelost           hash: member id → when its share was marked lost (QuitShare), in
//	                      milliseconds of the server's clock; cleared when the member joins
//	                      again or takes its lease (schema version 8)
//	P sharepathslost:<member>
//	                      hash: path name → when the member's share on that path was marked
//	                      lost (QuitSharePath), the same way (schema version 8)
//
// Version 2 only changed how the source and entity rows are written.
// The chain keys came after version 1 without changing it: absent, they
// read as a chain never trimmed, cursors never set and claims free. So did
// routes: absent, no route's derivation was recorded, and the next member
// to open records its own; and shares: absent, no member holds a share
// group, and a member stopping keeps its subscription; and sharesessions
// and the share claims: absent, no gone member's session is adopted until
// its member records its share again; and sharepaths and their claims:
// absent, no gone member's session on a path is adopted until its member
// records its share there again (a build from before records none, and
// takes its lease without clearing them: a member that ran this build
// and runs it again is adopted while its lease is gone, as it would be
// on this build).
type keys struct {
	prefix                   string
	schema                   string
	members, membersLast     string
	heads, chainBases        string
	keyIndex, keyCount       string
	sources, sourceVersions  string
	entities, entityVersions string
	quarantine, quarIDs      string
	quarHeld, quarHeldBy     string
	pruneLock                string
	unlocked                 string
	routes                   string
	shares                   string // member → the share group it holds
	shareSessions            string // member → its share's lease holder and client id
	shareLost                string // member → when its share was marked lost
}

func newKeys(p string) keys {
	return keys{
		prefix:         p,
		schema:         p + "schema",
		members:        p + "members",
		membersLast:    p + "members:last",
		heads:          p + "heads",
		chainBases:     p + "chainbases",
		keyIndex:       p + "keys",
		keyCount:       p + "keys:count",
		sources:        p + "source",
		sourceVersions: p + "source:version",
		entities:       p + "entity",
		entityVersions: p + "entity:version",
		quarantine:     p + "quarantine",
		quarIDs:        p + "quarantine:ids",
		quarHeld:       p + "quarantine:held",
		quarHeldBy:     p + "quarantine:heldby",
		pruneLock:      p + "prune",
		unlocked:       p + "unlocked",
		routes:         p + "routes",
		shares:         p + "shares",
		shareSessions:  p + "sharesessions",
		shareLost:      p + "sharelost",
	}
}

func (k *keys) lease(member string) string      { return k.prefix + "lease:" + member }
func (k *keys) chain(member string) string      { return k.prefix + "chain:" + member }
func (k *keys) chainIndex(member string) string { return k.prefix + "chainindex:" + member }
func (k *keys) chainCursors(member string) string {
	return k.prefix + "chaincursors:" + member
}
func (k *keys) chainClaim(member string) string { return k.prefix + "chainclaim:" + member }
func (k *keys) shareClaim(member string) string { return k.prefix + "shareclaim:" + member }
func (k *keys) sharePaths(member string) string { return k.prefix + "sharepaths:" + member }
func (k *keys) sharePathsLost(member string) string {
	return k.prefix + "sharepathslost:" + member
}
func (k *keys) keyPrefix() string             { return k.prefix + "key:" }
func (k *keys) keySetPrefix() string          { return k.prefix + "keyset:" }
func (k *keys) sourceLock(id string) string   { return k.prefix + "lock:s:" + id }
func (k *keys) entityLock(name string) string { return k.prefix + "lock:e:" + name }

// sharePathClaim is the claim of member's session on path, whose name
// holds no colon (config's feed names).
func (k *keys) sharePathClaim(path, member string) string {
	return k.prefix + "sharepathclaim:" + path + ":" + member
}

// key is the name of an idempotency key's entry; it ends with the key's 32
// bytes, which the scripts take back from it.
func (k *keys) key(h engine.Hash) string {
	var b strings.Builder
	b.Grow(len(k.prefix) + 4 + len(h))
	b.WriteString(k.prefix)
	b.WriteString("key:")
	b.Write(h[:])
	return b.String()
}

// keyValueLen is the size of a stored key entry: digest, time, ordinal.
const keyValueLen = 32 + 8 + 8

func encodeKeyValue(e *engine.KeyEntry) string {
	var b [keyValueLen]byte
	copy(b[:], e.Digest[:])
	binary.BigEndian.PutUint64(b[32:], uint64(e.Time))
	binary.BigEndian.PutUint64(b[40:], e.Ordinal)
	return string(b[:])
}

func decodeKeyValue(key engine.Hash, v string) (engine.KeyEntry, error) {
	if len(v) != keyValueLen {
		return engine.KeyEntry{}, fmt.Errorf("key entry %s holds %d bytes, want %d", key, len(v), keyValueLen)
	}
	e := engine.KeyEntry{Key: key}
	copy(e.Digest[:], v)
	e.Time = int64(binary.BigEndian.Uint64([]byte(v[32:40])))
	e.Ordinal = binary.BigEndian.Uint64([]byte(v[40:]))
	return e, nil
}

func encodeHead(h engine.AuditHead) string {
	return strconv.FormatUint(h.Position, 10) + " " + h.Hash.String()
}

func decodeHead(v string) (engine.AuditHead, error) {
	pos, hash, ok := strings.Cut(v, " ")
	n, err := strconv.ParseUint(pos, 10, 64)
	if !ok || err != nil {
		return engine.AuditHead{}, fmt.Errorf("chain head %q is not \"<position> <hash>\"", v)
	}
	h, err := engine.ParseHash(hash)
	if err != nil {
		return engine.AuditHead{}, fmt.Errorf("chain head %q: %w", v, err)
	}
	return engine.AuditHead{Position: n, Hash: h}, nil
}

// quarantineID is the field of a quarantine entry: fixed-width hex, so that
// the index's lexical order is id order.
func quarantineID(id uint64) string { return fmt.Sprintf("%016x", id) }
