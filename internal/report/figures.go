package report

import (
	"time"

	"github.com/replayguard/replayguard/engine"
)

// Options say what a report covers and where its records came from.
type Options struct {
	// From and To bound the period: a record counts when From <= time < To.
	// Zero: unbounded on that side.
	From, To time.Time
	// Route keeps only that route's decisions; empty: every route. Broker
	// changes are the connection's and are shown whatever the route.
	Route string
	// Heads are the chain heads the store keeps apart from the records, by
	// member ("" on a single-owner store). A chain whose last record does
	// not match its head is reported broken (a removed tail). Nil: the heads
	// are not checked, and the report says so.
	Heads map[string]engine.AuditHead
	// StoreBroken are chains the store itself finds broken beyond what
	// their records show, by member, with why: a shared store that holds
	// records of a chain outside every chain it lists (audit.CheckStray:
	// past the head it keeps, or of a member it no longer lists). Such a
	// chain is reported broken, never left out of the verification.
	StoreBroken map[string]string
	// QuarantineBases are a shared store's members' quarantine bases
	// (engine.SharedStore.QuarantineBase), by member: a held decision's
	// quarantine id is its member's base plus its position. Nil: the report
	// learns a member's base from a resolution that names exactly one
	// member's held decision, and shows the others by member and position.
	QuarantineBases map[string]uint64
	// Bases are where chains trimmed by audit retention now start in the
	// store, by member: the last archived record's position and hash. A
	// chain whose records begin after its base is verified from it; one
	// whose records begin at position 1 (read from the archive first) is
	// verified from there, and the records at or below its base are
	// counted as archived. Positions that neither the archive nor the
	// store gave are named as missing from the archive at or below the
	// base, from the store above it; a member absent from the map has base
	// 0 (its chain never trimmed). Nil: the bases were not read, and such
	// positions are named without saying which should hold them.
	Bases map[string]engine.AuditHead
	// Archive is the directory the archived records were read from, shown
	// as given; empty: none was read. A period that reaches before a
	// chain's first record read, when that is not position 1, is an error
	// naming the positions missing, never a smaller report.
	Archive string
	// Store is the store kind (memory, embedded, redis, postgres), ReadPath
	// how the records were read (the store itself, or a running process's
	// API) and ConfigDigest the SHA-256 of the effective configuration:
	// shown as given.
	Store, ReadPath, ConfigDigest string
	// MaxBars bounds the timeline's bars: past it, a bar covers more than a
	// minute (2, 5, 10, 15, 30 or 60 minutes, then hours). Default 360.
	MaxBars int
	// Now stamps the report. Default time.Now.
	Now func() time.Time
}

// DefaultMaxBars is the timeline's default bound on bars.
const DefaultMaxBars = 360

// Report is the after-action report: every figure the HTML shows, and its
// JSON form.
type Report struct {
	Generated    time.Time  `json:"generated"`
	From         *time.Time `json:"from,omitempty"` // the period asked for
	To           *time.Time `json:"to,omitempty"`
	Route        string     `json:"route,omitempty"`
	First        *time.Time `json:"first,omitempty"` // the first and last decision in the period
	Last         *time.Time `json:"last,omitempty"`
	Store        string     `json:"store"`
	ReadPath     string     `json:"read_path"`
	Archive      string     `json:"archive,omitempty"` // the archive read before the store, when one was
	ConfigDigest string     `json:"config_digest"`

	Totals        Counts         `json:"totals"`
	Timeline      Timeline       `json:"timeline"`
	BrokerChanges []BrokerChange `json:"broker_changes"`
	// Reconnects are new connections to the broker a chain's feed was
	// already reading (BrokerChange.Reconnect), apart from the changes of
	// broker.
	Reconnects   []BrokerChange   `json:"reconnects"`
	StoreLosses  []StoreLoss      `json:"store_losses"`
	Sources      []SourceFigures  `json:"sources"`
	Quarantine   []QuarantineItem `json:"quarantine"`
	Verification Verification     `json:"verification"`
	// Replayed are the entities with the most replays suppressed in the
	// period, most first, then the most twins (ten at most): each a link
	// to its lineage.
	Replayed []EntityReplays `json:"replayed"`
	// Lineages are the entities a reviewer named, then the most replayed:
	// each one's lineage up to the period's end (see Lineages).
	Lineages []*Lineage `json:"lineages"`
}

// EntityReplays is how many replays of the messages that changed an entity
// were suppressed in the period, and apart from them how many twins: the
// copies another redundant path (mqtt.feeds) delivered, which are
// duplicates by design.
type EntityReplays struct {
	Entity     string `json:"entity"`
	Suppressed uint64 `json:"suppressed"`
	Twins      uint64 `json:"twins,omitempty"`
}

// Outcomes counts decisions by outcome.
type Outcomes struct {
	Applied     uint64 `json:"applied"`
	AppliedLate uint64 `json:"applied_late"`
	Duplicate   uint64 `json:"duplicate"`
	Conflict    uint64 `json:"conflict"`
	Quarantined uint64 `json:"quarantined"`
	Malformed   uint64 `json:"malformed"`
}

// Counts are the deliveries' outcomes and the operators' actions.
type Counts struct {
	Outcomes
	Released  uint64 `json:"released"`   // quarantine entries an operator released: applied, or found duplicate
	HeldAgain uint64 `json:"held_again"` // releases whose message was held again, under a new entry
	Discarded uint64 `json:"discarded"`  // quarantine entries an operator discarded
	// Forwards are the outbox entries a downstream refused for good, and
	// what operators did with them.
	Forwards Forwards `json:"forwards"`
}

// Forwards count the forward effects' audit records.
type Forwards struct {
	Held    uint64 `json:"held"`    // held for an operator: refused by the downstream, or held by one while pending
	Retried uint64 `json:"retried"` // put back into the outbox by an operator
	Dropped uint64 `json:"dropped"` // dropped by an operator
}

// count counts a forward record; it reports false for any other.
func (f *Forwards) count(outcome string) bool {
	switch outcome {
	case engine.OutcomeForwardHeld:
		f.Held++
	case engine.OutcomeForwardRetried:
		f.Retried++
	case engine.OutcomeForwardDropped:
		f.Dropped++
	default:
		return false
	}
	return true
}

// Timeline is decisions per bucket (a minute, unless the period needs
// wider ones, or is under two minutes and gets seconds) by outcome, every
// bucket of the period present.
type Timeline struct {
	BucketSeconds int64    `json:"bucket_seconds"`
	Buckets       []Bucket `json:"buckets"`
}

// Bucket is one bar of the timeline: the deliveries decided in
// [Start, Start+BucketSeconds).
type Bucket struct {
	Start time.Time `json:"start"`
	Outcomes
}

// Total is the bucket's number of decisions.
func (o Outcomes) Total() uint64 {
	return o.Applied + o.AppliedLate + o.Duplicate + o.Conflict + o.Quarantined + o.Malformed
}

// BrokerChange is a delivery from another broker than the one before it
// on the same chain (member) and feed: a failover, or the first broker
// seen (From empty). In Report.Reconnects, it is the first delivery of a
// new connection to the same broker (Reconnect, From equal to To): a
// restart of the broker, a dropped link, or replayguard's own restart. The
// audit records a connection on its first delivery
// (engine.AuditRecord.Connected); records written before they did show
// none of the last kind.
type BrokerChange struct {
	Time     time.Time `json:"time"`
	Member   string    `json:"member,omitempty"`
	Position uint64    `json:"position"`       // the first record from the new broker, or of the new connection
	Feed     string    `json:"feed,omitempty"` // the redundant path (mqtt.feeds); empty with one
	From     string    `json:"from"`
	To       string    `json:"to"`
	// Reconnect: the same broker, on a new connection.
	Reconnect bool `json:"reconnect,omitempty"`
	// Connected is when the new connection came up, when the audit
	// records it.
	Connected time.Time `json:"connected,omitzero"`
}

// StoreLoss is what a member did about a shared store that lost its
// commits (it failed over to a standby that lacked them): the deliveries
// it decided again from its journal, or an operator's acceptance of what
// no journal held. Its reason says which positions.
type StoreLoss struct {
	Time     time.Time `json:"time"`
	Member   string    `json:"member,omitempty"`
	Position uint64    `json:"position"`
	Outcome  string    `json:"outcome"` // recovered or loss_accepted
	Reason   string    `json:"reason"`
	Operator string    `json:"operator,omitempty"`
}

// SourceFigures are one (route, source)'s decisions in the period.
type SourceFigures struct {
	Route  string   `json:"route"`
	Source []string `json:"source"`
	Counts
	// GapsOpened counts decisions that skipped sequences (their audit
	// record's gap); MissingSequences is how many they skipped; GapsClosed
	// is how many of those gaps late fills in the period filled entirely.
	GapsOpened       uint64 `json:"gaps_opened"`
	MissingSequences uint64 `json:"missing_sequences"`
	GapsClosed       uint64 `json:"gaps_closed"`
}

// QuarantineItem is a decision that held a message (conflict, quarantined,
// malformed) and what became of it.
type QuarantineItem struct {
	// ID is the quarantine entry's id (what release and discard take); 0
	// when the report cannot tell it (a shared store's member whose number
	// no resolution revealed).
	ID       uint64      `json:"id,omitempty"`
	Member   string      `json:"member,omitempty"`
	Position uint64      `json:"position"`
	Time     time.Time   `json:"time"`
	Route    string      `json:"route,omitempty"`
	Topic    string      `json:"topic"`
	Source   []string    `json:"source,omitempty"`
	Sequence *int64      `json:"sequence,omitempty"`
	Outcome  string      `json:"outcome"`
	Reason   string      `json:"reason"`
	Broker   string      `json:"broker,omitempty"`
	Status   string      `json:"status"` // open, released, held_again or discarded
	Resolved *Resolution `json:"resolution,omitempty"`
}

// Resolution is an operator's release or discard of a quarantine entry.
type Resolution struct {
	Action   string    `json:"action"` // released, held_again (released and held again) or discarded
	Outcome  string    `json:"outcome"`
	Time     time.Time `json:"time"`
	Member   string    `json:"member,omitempty"`
	Position uint64    `json:"position"`
	Operator string    `json:"operator"`
	Reason   string    `json:"reason,omitempty"`
	// Held is the entry that holds the message again after a release
	// held again (action held_again), when the report can tell its id.
	Held  uint64 `json:"held,omitempty"`
	ref   uint64
	topic string
}

// Verification is the hash chains' check: every record of every chain,
// from position 1 or, where retention archived the oldest, from the base
// the store keeps.
type Verification struct {
	Intact      bool          `json:"intact"`
	HeadChecked bool          `json:"head_checked"` // against the heads the store keeps
	Chains      []ChainStatus `json:"chains"`
}

// ChainStatus is one chain's check, and what of it was read.
type ChainStatus struct {
	Member        string     `json:"member,omitempty"`
	FirstPosition uint64     `json:"first_position,omitempty"` // the first record read
	First         *time.Time `json:"first,omitempty"`          // its time
	LastPosition  uint64     `json:"last_position,omitempty"`  // the last record read
	Last          *time.Time `json:"last,omitempty"`           // its time
	Archived      uint64     `json:"archived,omitempty"`       // records read from the archive
	Records       uint64     `json:"records"`                  // verified
	// HeadPosition and HeadHash are the last link verified: the chain's
	// head when it is intact, where the verification stopped when broken.
	HeadPosition uint64 `json:"head_position"`
	HeadHash     string `json:"head_hash"`
	Broken       string `json:"broken,omitempty"` // why and where, when not intact
}
