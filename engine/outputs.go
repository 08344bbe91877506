package engine

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// ForwardSpec is a forward effect: where an applied message's original
// bytes go after its commit, through the outbox. Exactly one field is set.
type ForwardSpec struct {
	// Topic is an MQTT topic template: "{topic}" is the message's own
	// topic, other placeholders are paths, like an entity template.
	Topic string
	// Webhook is a URL the payload is POSTed to.
	Webhook string
	// NATS is a JetStream subject template, like Topic.
	NATS string
}

// Output kinds of an outbox entry.
const (
	OutputMQTT    = "mqtt"
	OutputWebhook = "webhook"
	OutputNATS    = "nats"
)

// SQLStatement is one sql effect of an applied message. The store runs
// the batch's statements in the batch's own transaction, in order; a store
// that cannot run them refuses a route that has any (see Capabilities.SQL).
type SQLStatement struct {
	Key    Hash   // the message's idempotency key: a refusal names it
	Route  string // the route and the index of the effect, for messages
	Effect int
	SQL    string
	Args   []SQLArg
	// Run is which of the effect's runs for its message this is, from 1,
	// of Runs: a message that carries several values of a path the
	// statement reads (SetReadings) runs it once for each, in the
	// message's order. Both are 0 for a statement run once.
	Run, Runs int
}

// SQLArg is one argument of a statement, with its JSON meaning kept.
type SQLArg struct {
	Kind ArgKind
	Text string // exact decimal text of a number, the string, "true"/"false"
}

// ArgKind says what an SQLArg holds.
type ArgKind uint8

// The argument kinds.
const (
	ArgNull   ArgKind = iota // JSON null, or a path absent in the message
	ArgNumber                // a JSON number, as exact decimal text
	ArgString
	ArgBool
)

// SQLRefusals is what a store passes back through Rows when a statement
// failed because of its message (SQLSTATE class 22 or 23): the message's
// key and the reason, naming the SQLSTATE and the database's words. The
// batch is decided again and a message whose key is refused is quarantined
// instead of applied; the rest of the batch commits.
type SQLRefusals map[Hash]string

// OutboxEntry is one forward effect of an applied message, written in the
// decision's commit and delivered after it by a drainer, at least once, in
// ID order. Every copy carries Key.
type OutboxEntry struct {
	ID       uint64    `json:"id"`     // audit position << 8 | the forward's index in its route
	Output   string    `json:"output"` // OutputMQTT, OutputWebhook or OutputNATS
	Target   string    `json:"target"` // topic, URL or subject
	Route    string    `json:"route"`
	Topic    string    `json:"topic"` // the message's own topic
	Source   []string  `json:"source"`
	Key      Hash      `json:"key"`
	Epoch    string    `json:"epoch,omitempty"`
	Sequence int64     `json:"sequence"` // -1 on an unsequenced route
	Time     time.Time `json:"time"`     // when it was decided
	Payload  []byte    `json:"payload"`
}

// OutboxID is the ID of the outbox entry of forward index i of the
// decision at audit position pos.
func OutboxID(pos uint64, i int) uint64 { return pos<<8 | uint64(i) }

// maxForwards caps a route's forward effects: OutboxID keeps 8 bits for
// the index.
const maxForwards = 256

// OutboxHold moves an entry its downstream refused for good (a webhook's
// 4xx) out of the pending outbox, keeping it with the reason for an
// operator. Member is the outbox's member ("" on a single-owner store).
type OutboxHold struct {
	Member string `json:"member,omitempty"`
	ID     uint64 `json:"id"`
	Reason string `json:"reason"`
	// Output is the entry's output kind (OutputMQTT, …), for the
	// observers' counts; the stores need it not.
	Output string `json:"output,omitempty"`
	// Pending is set on an operator's hold of an entry it read pending
	// (Engine.HoldPending): an entry no longer pending when the batch is
	// written (the drainer delivered it meanwhile) fails the whole batch
	// with ErrNotFound, nothing of it written. Unset (the drainer's own
	// hold), such an entry is left alone.
	Pending bool `json:"pending,omitempty"`
}

// OutboxResolve is an operator's resolution of a held entry of member's
// outbox ("" on a single-owner store): Requeue puts it back into the
// pending outbox, with its ID and bytes unchanged, for the drainer to
// deliver again; otherwise it is dropped for good.
type OutboxResolve struct {
	Member  string `json:"member,omitempty"`
	ID      uint64 `json:"id"`
	Requeue bool   `json:"requeue"`
}

// OutboxStore keeps the outbox. On a single-owner store member is always
// "". Each member's entries are delivered by one drainer at a time.
type OutboxStore interface {
	// Outbox returns up to limit pending entries of member's outbox with
	// ID > after, in ID order.
	Outbox(ctx context.Context, member string, after uint64, limit int) ([]OutboxEntry, error)
	// OutboxDone removes delivered entries; IDs no longer pending are
	// ignored.
	OutboxDone(ctx context.Context, member string, ids []uint64) error
	// OutboxDepth counts member's pending entries.
	OutboxDepth(ctx context.Context, member string) (int, error)
	// OutboxHeld returns the held entries of every member, with why.
	OutboxHeld(ctx context.Context) ([]HeldEntry, error)
}

// OutboxClaimer is implemented by the shared stores (and the members of
// the group store in memory): it says whose outboxes this handle's
// drainer may drain now, so that each member's outbox is drained by one
// process at a time, and a dead member's by another.
//
// A claim is one member's outbox, held by one handle for ClaimTTL unless
// renewed. ClaimOutboxes takes or renews, and returns sorted by member id:
//   - the claim of the handle's own member, unless another live handle
//     holds it (one that took it over while this member was dead);
//   - the claim of every other member that has pending entries and whose
//     member lease is expired or free, when that claim is free, expired or
//     already this handle's. Once such a member holds its lease again
//     (it restarted) its claim is no longer renewed or returned here: its
//     own drainer gets it back when this handle releases it, or within
//     ClaimTTL. A restarted member is never refused start for it.
//
// A handle whose member's lease another process has taken (it stalled past
// the lease) claims nothing, its own member's outbox included: it answers
// none, and its drainer stops and releases what it drained, for the
// lease's holder to take.
//
// The drainer calls ClaimOutboxes at least every ClaimTTL/3, drains only
// the members of its last answer, stops draining a member missing from it
// and, once those lanes stopped, calls ReleaseOutbox, which gives up the
// claim at once (also when a member's outbox is drained empty). When its
// claims cannot be renewed it stops draining with a third of ClaimTTL
// left since the last renewal. Close releases the handle's claims;
// those of a killed process expire. The claim spares duplicate deliveries;
// it does not fence Outbox, OutboxDone or holds: a drainer stalled beyond
// ClaimTTL may overlap the next claimant, which delivery at least once, each
// copy keyed, tolerates. A read-only handle claims nothing: ClaimOutboxes
// and ReleaseOutbox fail. Safe for concurrent use.
type OutboxClaimer interface {
	// ClaimOutboxes takes or renews this handle's claims and returns the
	// members whose outboxes it may drain now.
	ClaimOutboxes(ctx context.Context) ([]string, error)
	// ReleaseOutbox gives up this handle's claim of member's outbox; a
	// claim it does not hold is left alone.
	ReleaseOutbox(ctx context.Context, member string) error
	// ClaimTTL is how long a claim holds without renewal.
	ClaimTTL() time.Duration
}

// CheckOutbox checks the outbox entries of a batch, as every store does
// before writing anything: their IDs ascend and each names one of the
// batch's own audit records (OutboxID of its position), so an entry is
// never written twice; and that no held entry is resolved twice. A bad
// entry is an error wrapping ErrOutboxID.
func CheckOutbox(b *Batch) error {
	if err := checkResolved(b.OutboxResolved); err != nil {
		return err
	}
	if len(b.Outbox) == 0 {
		return nil
	}
	var first, last uint64
	if n := len(b.Audit); n > 0 {
		first, last = b.Audit[0].Position, b.Audit[n-1].Position
	}
	prev := uint64(0)
	for i := range b.Outbox {
		id := b.Outbox[i].ID
		if pos := id >> 8; pos == 0 || pos < first || pos > last {
			return fmt.Errorf("%w: entry %d names position %d, outside the batch's records %d..%d", ErrOutboxID, id, pos, first, last)
		}
		if i > 0 && id <= prev {
			return fmt.Errorf("%w: entry %d after entry %d", ErrOutboxID, id, prev)
		}
		prev = id
	}
	return nil
}

// checkResolved refuses two resolutions of one held entry in a batch.
func checkResolved(rs []OutboxResolve) error {
	if len(rs) < 2 {
		return nil
	}
	seen := make(map[OutboxResolve]bool, len(rs))
	for _, r := range rs {
		r.Requeue = false
		if seen[r] {
			return fmt.Errorf("%w: held entry %d of member %q resolved twice", ErrOutboxID, r.ID, r.Member)
		}
		seen[r] = true
	}
	return nil
}

// HeldEntry is an outbox entry its downstream refused, kept for an
// operator.
type HeldEntry struct {
	OutboxEntry
	Member string `json:"member,omitempty"`
	Reason string `json:"reason"`
}

// OutcomeForwardHeld is the audit outcome of an outbox entry its
// downstream refused for good, held for an operator.
const OutcomeForwardHeld = "forward_held"

// HoldForward records that entry of member's outbox was refused by its
// downstream for good: an audit record (outcome forward_held, ref the
// entry, the reason with the downstream's answer) and the entry moved to
// the held entries, in one commit.
func (e *Engine) HoldForward(ctx context.Context, member string, entry OutboxEntry, reason string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.ready(ctx); err != nil {
		return err
	}
	hold := func(now time.Time) {
		r := AuditRecord{Time: now.UTC(), Route: entry.Route, Topic: entry.Topic, Source: entry.Source,
			Epoch: entry.Epoch, Key: entry.Key, Outcome: OutcomeForwardHeld,
			Reason: fmt.Sprintf("%s %s: %s", entry.Output, RedactTarget(entry.Output, entry.Target), reason), Ref: entry.ID}
		if entry.Sequence >= 0 {
			s := entry.Sequence
			r.Sequence = &s
		}
		e.appendAudit(&r)
		e.pending.batch.OutboxHeld = append(e.pending.batch.OutboxHeld, OutboxHold{Member: member, ID: entry.ID, Reason: r.Reason, Output: entry.Output})
	}
	return e.act(ctx, nil, hold)
}

// RedactTarget returns an entry's target as an audit record, a reason or a
// log line shows it: a webhook URL without its user information (a
// webhook's credentials, a password or a token as the user, are in its
// URL), anything else as it is.
func RedactTarget(output, target string) string {
	if output != OutputWebhook {
		return target
	}
	if u, err := url.Parse(target); err == nil && u.User != nil {
		u.User = url.User("xxxxx")
		return u.String()
	}
	return target
}
