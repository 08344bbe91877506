package engine

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Outcome is what the engine decided for one delivery.
type Outcome uint8

// The outcomes, in the order DESIGN.md lists them. Only Applied and
// AppliedLate run effects; Conflict, Quarantined and Malformed keep the raw
// message in quarantine.
const (
	Applied Outcome = iota
	AppliedLate
	Duplicate
	Conflict
	Quarantined
	Malformed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"applied", "applied_late", "duplicate", "conflict", "quarantined", "malformed"}

// Outcomes lists every outcome, in order.
func Outcomes() []Outcome {
	return []Outcome{Applied, AppliedLate, Duplicate, Conflict, Quarantined, Malformed}
}

func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// ParseOutcome returns the outcome named s.
func ParseOutcome(s string) (Outcome, bool) {
	for i, n := range outcomeNames {
		if n == s {
			return Outcome(i), true
		}
	}
	return 0, false
}

// Effective reports whether the outcome runs effects.
func (o Outcome) Effective() bool { return o == Applied || o == AppliedLate }

// Held reports whether the outcome keeps the raw message in quarantine.
func (o Outcome) Held() bool { return o == Conflict || o == Quarantined || o == Malformed }

// Message is one delivery from a source. Only Topic and Payload feed the
// decision; Dup and Broker are recorded in the audit trail, never trusted.
type Message struct {
	Topic   string
	Payload []byte
	Dup     bool   // the transport's redelivery flag, logged only
	Broker  string // where the delivery came from (broker URL, file name)
	// Feed names the redundant broker path (mqtt.feeds) that delivered the
	// message; empty with one path. Recorded in the audit trail.
	Feed string
	// Connected, set on the first delivery of each broker connection, is
	// when that connection was established: a new connection to the same
	// broker (its restart, a dropped link, replayguard's own restart) is
	// told apart in the audit trail from a delivery on the one before.
	// Zero on every other delivery.
	Connected time.Time
	// Invalid, when set, is why the transport could not even frame the
	// message (a broken capture line): it is malformed for that reason and
	// Payload holds the raw bytes.
	Invalid string

	prepared *Delivery // set by Engine.Prepare
	prepErr  error
	recovery uint8 // decided again from the journal: recoveredHeld or recoveredApplied; 0 for a delivery
	// keyApplied: an operator releases a conflict, whose key was applied
	// with other content before it was held.
	keyApplied bool
	// logged: an operator releases a message whose key the audit log
	// records applied with the same content (its key had left the key
	// window): the record that applied it.
	logged *AuditRecord
	// loggedKind: an operator releases a message of a LoggedPlacer's, and
	// these are the records of the log that may have applied it; the one
	// its kind places it at becomes logged.
	loggedKind []LoggedApplication
	// committed is the decision an earlier attempt of this batch committed
	// when the batch was split and its other part failed (a shared store:
	// see sharedWindows.decideBatch); passed again, it is not decided again.
	committed *Decision
	// committedAt is how many store losses the engine had accepted when
	// committed was set (sharedWindows.lost): a later one that gave up
	// its position took the decision with it.
	committedAt int
}

// Decided reports whether an earlier attempt of m's batch committed m's
// decision: a shared store commits a batch in parts when other members
// hold some of its rows (Reads.SkipHeld), and a later part may fail. A
// caller that gives such a batch up has not abandoned m: it is decided,
// and only its acknowledgement is left undone (the broker sends it again
// and it is found duplicate).
func (m *Message) Decided() bool { return m.committed != nil }

// Hash is a SHA-256 value: an idempotency key, a content digest or an audit
// chain link.
type Hash [32]byte

func (h Hash) String() string {
	var buf [2 * len(h)]byte // on the stack: the string is the one allocation
	hex.Encode(buf[:], h[:])
	return string(buf[:])
}

// IsZero reports whether h is all zero bytes.
func (h Hash) IsZero() bool { return h == Hash{} }

// MarshalText writes h as 64 lowercase hex digits, its one text form: the
// form exports, the API and the audit chain's canonical encoding use.
func (h Hash) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, h[:]), nil }

// UnmarshalText reads the 64 lowercase hex digits MarshalText writes.
// Any other text is refused, so that a record read back re-encodes to the
// bytes its chain hash covers.
func (h *Hash) UnmarshalText(b []byte) error {
	if !unhex(h, b) {
		return fmt.Errorf("%w: %q", errBadHash, b)
	}
	return nil
}

// ParseHash reads the text form of a hash: 64 lowercase hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	err := h.UnmarshalText([]byte(s))
	return h, err
}

// unhex decodes exactly 64 lowercase hex digits into h.
func unhex(h *Hash, b []byte) bool {
	if len(b) != 2*len(h) {
		return false
	}
	for i := range h {
		hi, lo := hexValue[b[2*i]], hexValue[b[2*i+1]]
		if hi|lo > 0xf {
			return false
		}
		h[i] = hi<<4 | lo
	}
	return true
}

// hexValue maps a lowercase hex digit to its value and anything else to 0xff.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()

// Decision is the engine's verdict on one message, as audited.
type Decision struct {
	Outcome  Outcome
	Reason   string // why, naming the field or rule; empty for a plain apply
	Position uint64 // audit position of the decision's record
	Route    string
	Key      Hash // zero when the message was malformed before a key existed
	Digest   Hash
	Source   []string
	Epoch    string // canonical text of the epoch; empty when the route has none
	Sequence int64  // -1 when the route has none or it was not read
	ID       string
	Gap      *Range // sequences skipped by this message, if any
	Held     uint64 // the quarantine entry that holds the message, when it was held

	version Version  // orders this message's `set` writes
	changes []Change // what an effective message changed, for its audit record
}

// Range is an inclusive range of sequence numbers.
type Range struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// KeyEntry is one applied message's key in the key window.
type KeyEntry struct {
	Ordinal uint64 // insertion order, strictly increasing, never reused
	Key     Hash
	Digest  Hash
	// Time is when it was applied, in unix nanoseconds: by the wall clock
	// of the engine that applied it, or on a shared store that reads its
	// server's clock (Capabilities.Clock), by the group's key clock.
	Time int64
}

// EpochWindow is the anti-replay state of one (route, source, epoch).
//
// The current epoch keeps an RFC 6479 bitmap of the last span sequences,
// or, while it has seen every sequence from First to High, no bitmap: a
// run (seqwindow.go). An older epoch keeps no bitmap: its sequences in
// (Floor, High] that were never seen are exactly its in-window Gaps, so a
// sequence there that is in no gap was seen; sequences at or below Floor
// cannot be proven either way. But for an older epoch whose window held
// more gaps than the list keeps: it keeps its bitmap, which decides as the
// current epoch's does, until its gaps fit in the list (EpochWindow.retire).
type EpochWindow struct {
	Epoch   string   `json:"epoch"`
	Numeric bool     `json:"numeric"`          // the epoch is an integer, ordered numerically
	Value   int64    `json:"value"`            // the integer, or the rank of a string epoch by first appearance
	High    int64    `json:"high"`             // highest sequence seen; -1 before the first
	First   int64    `json:"first"`            // lowest sequence seen: reports leave out never-seen sequences below it
	Bitmap  []uint64 `json:"bitmap,omitempty"` // nil for a run and an older epoch (but see above): bit s%span set when s was seen
	Floor   int64    `json:"floor"`            // older epochs and runs: sequences <= Floor cannot be proven
	Gaps    []Range  `json:"gaps,omitempty"`   // open gaps, ascending

	// lent is set on a window and its copy when they share a Bitmap
	// (SourceState.clone): either copies the bitmap before it changes it.
	// A fleet's source is seldom changed again before the batch that
	// copied it commits, so the bitmap is seldom copied at all.
	lent bool
}

// SourceState is the persisted window of one (route, source).
type SourceState struct {
	Route  string        `json:"route"`
	Source []string      `json:"source"`
	Epochs []EpochWindow `json:"epochs"`         // newest first: the current epoch, then the kept older ones
	Seen   []string      `json:"seen,omitempty"` // string epochs in order of first appearance
	// Sparkplug is the edge node's session of a sparkplug route's source
	// (route, [group, edge]); nil for every other route.
	Sparkplug *SparkplugState `json:"sparkplug,omitempty"`
	// unstored: the engine created the window, and no batch that writes it
	// was sealed yet (Batch.NewRows).
	unstored bool
	// changedIn and usedIn are the pending batches that last changed it
	// and last looked it up (pending.gen).
	changedIn, usedIn uint64
	// Feed is the redundant broker path (mqtt.feeds) whose delivery the
	// source's last message applied was; empty with one path.
	Feed string `json:"feed,omitempty"`
}

// ID is the store key of the source: route and parts, length-prefixed.
func (s *SourceState) ID() string { return sourceID(s.Route, s.Source) }

// EntityState is the projected state of one entity.
type EntityState struct {
	Name   string `json:"name"`
	Fields Fields `json:"fields"`
}

// FieldValue is one projected field. Exactly one of Num and Str is
// meaningful, as Kind says. Version orders `set` writers: (epoch rank, sequence).
type FieldValue struct {
	Kind    ValueKind `json:"kind"`
	Num     string    `json:"num,omitempty"` // exact decimal text
	Str     string    `json:"str,omitempty"` // string, or raw JSON for bool/null
	Version Version   `json:"version"`
}

// ValueKind says how a field value is held.
type ValueKind uint8

// The value kinds.
const (
	KindNumber ValueKind = iota
	KindString
	KindRaw // true, false, null as JSON text
)

// Version orders `set` writers of a field.
type Version struct {
	Epoch    int64  `json:"e"` // numeric epoch, or the rank of a string epoch
	Sequence int64  `json:"s"`
	Ordinal  uint64 `json:"o"` // audit position, the tie breaker for unsequenced routes
	// Source tells the writing message's source (route and parts, hashed:
	// sourceTag); 0 in a row written before fields carried it.
	Source uint64 `json:"src,omitempty"`
}

// overwrittenBy reports whether a set of version w overwrites a field of
// version v. Of one source's messages the newer by (epoch, sequence)
// wins: a late old update never overwrites newer state. Two sources'
// epochs and sequences do not compare: of those, the one applied last
// wins, but for a late message (older than its source's newest, released
// from quarantine, or decided again from the journal), which never
// overwrites another source's value.
func (v Version) overwrittenBy(w Version, late bool) bool {
	if v.Source != 0 && w.Source != 0 && v.Source != w.Source {
		return !late
	}
	return v.Less(w)
}

// Less reports whether v was written before w.
func (v Version) Less(w Version) bool {
	if v.Epoch != w.Epoch {
		return v.Epoch < w.Epoch
	}
	if v.Sequence != w.Sequence {
		return v.Sequence < w.Sequence
	}
	return v.Ordinal < w.Ordinal
}

// AuditRecord is one decision in the append-only, hash-chained audit log.
// The JSON field order is the canonical form that Hash covers. Key, Digest,
// Prev and Hash are binary; their JSON is 64 lowercase hex digits, and a
// zero Key or Digest (a malformed message has none) is left out.
type AuditRecord struct {
	Position uint64    `json:"position"`
	Time     time.Time `json:"time"`
	Route    string    `json:"route"`
	Topic    string    `json:"topic"`
	Source   []string  `json:"source"`
	Epoch    string    `json:"epoch,omitempty"`
	Sequence *int64    `json:"sequence,omitempty"`
	ID       string    `json:"id,omitempty"`
	Key      Hash      `json:"key,omitzero"`
	Digest   Hash      `json:"digest,omitzero"`
	Outcome  string    `json:"outcome"`
	Reason   string    `json:"reason,omitempty"`
	Dup      bool      `json:"dup"`
	Broker   string    `json:"broker,omitempty"`
	// Feed names the redundant broker path that delivered the message
	// (mqtt.feeds); empty with one path, and left out of the JSON then, so
	// records written before it existed keep their bytes and hashes.
	Feed string `json:"feed,omitempty"`
	// Connected is when the broker connection that delivered the message
	// was established, on the first delivery of each connection (see
	// Message.Connected); zero, and left out of the JSON, on every other
	// record, so records written before it existed keep their bytes and
	// hashes.
	Connected time.Time `json:"connected,omitzero"`
	Ref       uint64    `json:"ref,omitempty"` // the quarantine entry a release or discard acts on
	// Operator names who released or discarded (the API token's name, or
	// the CLI's --operator); empty for every other decision, and left out
	// of the JSON then, so records written before it existed keep their
	// bytes and their hashes.
	Operator string `json:"operator,omitempty"`
	// Member is the consumer-group member whose chain holds the record, on
	// a shared store (one chain per member); empty on a single-owner store,
	// and left out of the JSON then, like Operator.
	Member string `json:"member,omitempty"`
	Gap    *Range `json:"gap,omitempty"` // sequences this message skipped: a gap opened
	// Effects says what an applied message changed, one entry per
	// operation on an entity's field, in the route's order; empty for every
	// other decision and left out of the JSON then, so records written
	// before it existed keep their bytes and their hashes.
	Effects []Change `json:"effects,omitempty"`
	Prev    Hash     `json:"prev"`
	Hash    Hash     `json:"hash"`
}

// Change is what one operation of an applied message did to one field of an
// entity: the lineage `explain` reads. Value and After are JSON scalars, the
// way `state --json` prints a field.
type Change struct {
	Entity string          `json:"entity"`
	Field  string          `json:"field"`
	Op     string          `json:"op"`    // add, set, max or min
	Value  json.RawMessage `json:"value"` // the message's value
	After  json.RawMessage `json:"after"` // the field's value after the operation
	// Lost marks a `set` older than the field's value (by epoch, then
	// sequence): it left the field as it was, and After is the newer value.
	Lost bool `json:"lost,omitempty"`
	// Historical marks a `set` whose message carried only historical values
	// of its path (Reading.Historical: a Sparkplug metric flagged
	// is_historical): it left the field as it was; Value is the last of
	// them, After the field's value.
	Historical bool `json:"historical,omitempty"`
}

// QuarantineEntry is a held message with its raw bytes. Its ID is the audit
// position of the decision that held it.
type QuarantineEntry struct {
	ID      uint64    `json:"id"`
	Time    time.Time `json:"time"`
	Outcome string    `json:"outcome"`
	Reason  string    `json:"reason"`
	Route   string    `json:"route,omitempty"`
	Topic   string    `json:"topic"`
	Key     string    `json:"key,omitempty"`
	Dup     bool      `json:"dup"`
	Broker  string    `json:"broker,omitempty"`
	Feed    string    `json:"feed,omitempty"` // the redundant path that delivered it (mqtt.feeds)
	Payload []byte    `json:"payload"`
	// Content identifies the held message within its key: HeldContent
	// of its topic and payload, set by the engine on the entries of a
	// Batch that have a Key. A store that declares Capabilities.Held
	// indexes the open entries by (Key, Content) (HeldFinder); an entry
	// without both is not indexed. The entries a store returns may leave
	// it zero.
	Content Hash `json:"-"`
}

// AuditHead is the last link of the audit chain.
type AuditHead struct {
	Position uint64 // position of the last record; 0 when the log is empty
	Hash     Hash
}

// clone copies the state, so the committer can encode it while the engine
// goes on deciding: deeply, but for the windows' bitmaps, which the two
// share until either changes its own (EpochWindow.own).
func (s *SourceState) clone() SourceState {
	c := *s
	// The marks are this engine's batches: a copy goes to the store, and
	// another engine, or this one restarted, counts its batches anew.
	c.unstored, c.changedIn, c.usedIn = false, 0, 0
	c.Source = append([]string(nil), s.Source...)
	c.Seen = append([]string(nil), s.Seen...)
	c.Sparkplug = s.Sparkplug.Clone()
	c.Epochs = make([]EpochWindow, len(s.Epochs))
	for i, w := range s.Epochs {
		if w.Bitmap != nil { // shared, and copied before a change (EpochWindow.own)
			s.Epochs[i].lent, w.lent = true, true
		}
		w.Gaps = append([]Range(nil), w.Gaps...)
		c.Epochs[i] = w
	}
	return c
}
